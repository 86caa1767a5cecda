package sluice.spark;

import java.util.Iterator;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.types.StructType;

/**
 * Rows of Spark's Kafka source with their values parsed as JSON objects straight from their
 * bytes ({@link ValueParser}). {@code from_json} (and {@code DataFrameReader.json(Dataset[String])})
 * parse the same text from characters: every value is decoded to UTF-16 first, and every nested
 * object the schema keeps as a string is written out again by a JSON generator. The job reads
 * its ranges with {@link KafkaRanges}; this serves rows that Spark's Kafka source read.
 */
public final class KafkaValues {
  private KafkaValues() {}

  /** {@code kafka}: rows of Spark's Kafka source; {@code schemaJson}: the value's schema. */
  public static Dataset<Row> parse(Dataset<Row> kafka, String schemaJson) {
    // the source's own rows, read by ordinal (a select would copy every value once more)
    StructType in = kafka.schema();
    int[] at = {in.fieldIndex("topic"), in.fieldIndex("partition"), in.fieldIndex("offset"), in.fieldIndex("value")};
    RDD<InternalRow> rows = kafka.queryExecution().toRdd();
    RDD<InternalRow> parsed = rows.toJavaRDD().mapPartitions(new Parse(schemaJson, at)).rdd();
    return kafka.sparkSession().internalCreateDataFrame(parsed, ValueParser.rowSchema(schemaJson), false);
  }

  /** One partition's records; a new parser per task (parsers are not thread-safe). */
  static final class Parse implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
    private static final long serialVersionUID = 1L;
    private final String schemaJson;
    private final int[] at;  // ordinals of topic, partition, offset, value in the source's rows

    Parse(String schemaJson, int[] at) {
      this.schemaJson = schemaJson;
      this.at = at;
    }

    @Override
    public Iterator<InternalRow> call(Iterator<InternalRow> rows) {
      ValueParser parser = new ValueParser(schemaJson);
      return new Iterator<InternalRow>() {
        @Override
        public boolean hasNext() {
          return rows.hasNext();
        }

        @Override
        public InternalRow next() {
          InternalRow r = rows.next();  // the source may reuse it: take copies
          return parser.row(r.isNullAt(at[0]) ? null : r.getUTF8String(at[0]).clone(), r.getInt(at[1]),
              r.getLong(at[2]), r.isNullAt(at[3]) ? null : r.getBinary(at[3]));
        }
      };
    }
  }
}
