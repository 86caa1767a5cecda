package sluice.spark;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import java.util.Iterator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One record's value parsed as a JSON object straight from its bytes, by Spark's own
 * {@link JacksonParser} (what Spark's JSON data source does for the lines of a file), into a row
 * {@code topic, partition, offset, value (the schema), bad}. {@code bad} is true when the value
 * is missing, is not exactly one JSON object, is not UTF-8, or does not fit the schema (the
 * caller stops the job naming the record's place). Not thread-safe: one per task.
 */
final class ValueParser {
  private final JacksonParser parser;
  private final JsonParser[] current = new JsonParser[1];
  private final scala.Function2<JsonFactory, byte[], JsonParser> open;
  private final scala.Function1<byte[], UTF8String> text = UTF8String::fromBytes;

  ValueParser(String schemaJson) {
    StructType schema = (StructType) DataType.fromJson(schemaJson);
    JSONOptions options = new JSONOptions(
        scala.collection.immutable.Map$.MODULE$.<String, String>empty(), "UTC", "_corrupt_record");
    scala.collection.immutable.Seq<org.apache.spark.sql.sources.Filter> noFilters =
        scala.jdk.javaapi.CollectionConverters.asScala(
            java.util.Collections.<org.apache.spark.sql.sources.Filter>emptyList()).toSeq();
    parser = new JacksonParser(schema, options, false, noFilters);
    open = (factory, bytes) -> {
      try {
        current[0] = factory.createParser(bytes);
        return current[0];
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    };
  }

  /** The rows' schema: the record's place, its parsed value, and whether it is poison. */
  static StructType rowSchema(String schemaJson) {
    return new StructType()
        .add("topic", DataTypes.StringType)
        .add("partition", DataTypes.IntegerType)
        .add("offset", DataTypes.LongType)
        .add("value", DataType.fromJson(schemaJson))
        .add("bad", DataTypes.BooleanType, false);
  }

  /** {@code bytes}: the record's own copy of its value (parsed strings may be slices of it). */
  InternalRow row(UTF8String topic, int partition, long offset, byte[] bytes) {
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
      // `bytes`: nothing to copy again
      InternalRow row = it.next();
      // what follows the object's closing brace (the parser's last token; the parser is closed
      // by now, and a closed parser's current location is the end of the input, but its last
      // token's location stays) must be blank
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
