package sluice.spark;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import java.util.Iterator;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Kafka record values parsed as JSON objects straight from their bytes, by Spark's own
 * {@link JacksonParser} -- what Spark's JSON data source does for the lines of a file.
 *
 * <p>{@code from_json} (and {@code DataFrameReader.json(Dataset[String])}) parse the same text
 * from characters: every value is decoded to UTF-16 first, and every nested object the schema
 * keeps as a string is written out again by a JSON generator. From bytes, Jackson's UTF-8 parser
 * reads the value once, and a nested object kept as a string is the slice of the record it came
 * from. Rows: {@code topic, partition, offset, value (the schema), bad}; {@code bad} is true
 * when the value is missing, is not one JSON object, or does not fit the schema (the caller
 * stops the job naming the record's place).
 */
public final class KafkaValues {
  private KafkaValues() {}

  /** {@code kafka}: rows of Spark's Kafka source; {@code schemaJson}: the value's schema. */
  public static Dataset<Row> parse(Dataset<Row> kafka, String schemaJson) {
    StructType value = (StructType) DataType.fromJson(schemaJson);
    StructType out = new StructType()
        .add("topic", DataTypes.StringType)
        .add("partition", DataTypes.IntegerType)
        .add("offset", DataTypes.LongType)
        .add("value", value)
        .add("bad", DataTypes.BooleanType, false);
    // the source's own rows, read by ordinal (a select would copy every value once more)
    StructType in = kafka.schema();
    int[] at = {in.fieldIndex("topic"), in.fieldIndex("partition"), in.fieldIndex("offset"), in.fieldIndex("value")};
    RDD<InternalRow> rows = kafka.queryExecution().toRdd();
    RDD<InternalRow> parsed = rows.toJavaRDD().mapPartitions(new Parse(schemaJson, at)).rdd();
    return kafka.sparkSession().internalCreateDataFrame(parsed, out, false);
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
      StructType schema = (StructType) DataType.fromJson(schemaJson);
      JSONOptions options = new JSONOptions(
          scala.collection.immutable.Map$.MODULE$.<String, String>empty(), "UTC", "_corrupt_record");
      scala.collection.immutable.Seq<org.apache.spark.sql.sources.Filter> noFilters =
          scala.jdk.javaapi.CollectionConverters.asScala(
              java.util.Collections.<org.apache.spark.sql.sources.Filter>emptyList()).toSeq();
      JacksonParser parser = new JacksonParser(schema, options, false, noFilters);
      JsonParser[] current = new JsonParser[1];
      scala.Function2<JsonFactory, byte[], JsonParser> open = (factory, bytes) -> {
        try {
          current[0] = factory.createParser(bytes);
          return current[0];
        } catch (java.io.IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      };
      scala.Function1<byte[], UTF8String> text = UTF8String::fromBytes;
      return new Iterator<InternalRow>() {
        @Override
        public boolean hasNext() {
          return rows.hasNext();
        }

        @Override
        public InternalRow next() {
          InternalRow r = rows.next();  // the source may reuse it: take copies
          UTF8String topic = r.isNullAt(at[0]) ? null : r.getUTF8String(at[0]).clone();
          int partition = r.getInt(at[1]);
          long offset = r.getLong(at[2]);
          byte[] bytes = r.isNullAt(at[3]) ? null : r.getBinary(at[3]);
          InternalRow value = bytes == null || !startsWithObject(bytes) ? null : one(bytes);
          return new GenericInternalRow(new Object[] {topic, partition, offset, value, value == null});
        }

        /** The value's one row, or null when it does not parse, fit the schema, or end there. */
        private InternalRow one(byte[] bytes) {
          try {
            Iterator<InternalRow> it = scala.jdk.javaapi.CollectionConverters.asJava(
                parser.parse(bytes, open, text).iterator());
            if (!it.hasNext()) {
              return null;
            }
            // a new row per record (JacksonParser.convertObject), its strings new or slices of
            // `bytes`, which is this record's own copy (getBinary): nothing to copy again
            InternalRow row = it.next();
            // what follows the object's closing brace (the parser's last token; the parser is
            // closed by now, and a closed parser's current location is the end of the input,
            // but its last token's location stays) must be blank
            long brace = current[0].currentTokenLocation().getByteOffset();
            long end = brace >= 0 && brace < bytes.length && bytes[(int) brace] == '}' ? brace + 1 : -1;
            if (it.hasNext() || end < 0 || !blank(bytes, (int) end)) {
              return null;  // more than one value in the record
            }
            return row;
          } catch (Exception e) {  // malformed JSON, invalid UTF-8, a field of the wrong type
            return null;
          } finally {
            if (current[0] != null) {
              try {
                current[0].close();
              } catch (java.io.IOException e) {
                // a parser over a byte array has nothing to release
              }
              current[0] = null;
            }
          }
        }
      };
    }

    private static boolean blank(byte[] b, int from) {
      for (int i = from; i < b.length; i++) {
        byte c = b[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
          return false;
        }
      }
      return true;
    }

    private static boolean startsWithObject(byte[] b) {
      for (byte c : b) {
        if (c == '{') {
          return true;
        }
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
          return false;
        }
      }
      return false;
    }
  }
}
