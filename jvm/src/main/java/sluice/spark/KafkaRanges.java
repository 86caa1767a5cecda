package sluice.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The Kafka store's offset ranges read by the executors, one task a range, each value parsed from
 * its bytes ({@link ValueParser}): rows {@code topic, partition, offset, value, bad}.
 *
 * <p>What Spark's Kafka source does for a batch read with known offsets, with less in between:
 * the driver asks the broker nothing (the store knows every range from its batch records), a
 * task polls its range with a plain read-committed {@link KafkaConsumer} (control records and
 * aborted transactions are skipped by the consumer, where Spark's source asks the broker for the
 * partition's offsets at every such gap), and each record becomes the job's row at once (no row
 * of Spark's Kafka schema in between). Consumers are pooled per executor and client settings, so
 * the next sync's tasks reuse their connections. A range whose start is outside the partition's
 * log (retention), whose topic partition the broker does not know, or that makes no progress for
 * 120 s ({@code sluice.stall.ms}, for tests) fails the task naming it; Spark retries a failed task
 * ({@code spark.task.maxFailures}) before it fails the job.
 */
public final class KafkaRanges {
  private KafkaRanges() {}

  /**
   * {@code ranges}: JSON {@code [[topic, partition, start, end], ...]} (end exclusive);
   * {@code settings}: JSON object of Kafka consumer settings (bootstrap servers, security).
   */
  public static Dataset<Row> read(SparkSession spark, String ranges, String settings, String schemaJson)
      throws java.io.IOException {
    ObjectMapper json = new ObjectMapper();
    List<Range> list = new ArrayList<>();
    for (JsonNode r : json.readTree(ranges)) {
      list.add(new Range(r.get(0).asText(), r.get(1).asInt(), r.get(2).asLong(), r.get(3).asLong()));
    }
    Map<String, String> props = new HashMap<>();
    json.readTree(settings).fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
    JavaRDD<Range> tasks = JavaSparkContext.fromSparkContext(spark.sparkContext())
        .parallelize(list, Math.max(1, list.size()));
    JavaRDD<InternalRow> rows = tasks.mapPartitions(new Read(props, schemaJson));
    return spark.internalCreateDataFrame(rows.rdd(), ValueParser.rowSchema(schemaJson), false);
  }

  /** One topic-partition's offsets {@code [start, end)}. */
  static final class Range implements Serializable {
    private static final long serialVersionUID = 1L;
    final String topic;
    final int partition;
    final long start;
    final long end;

    Range(String topic, int partition, long start, long end) {
      this.topic = topic;
      this.partition = partition;
      this.start = start;
      this.end = end;
    }

    @Override
    public String toString() {
      return "topic " + topic + " partition " + partition + " offsets [" + start + ", " + end + ")";
    }
  }

  /** A task's range(s), read one after another with one pooled consumer. */
  static final class Read implements FlatMapFunction<Iterator<Range>, InternalRow> {
    private static final long serialVersionUID = 1L;
    private final Map<String, String> props;
    private final String schemaJson;

    Read(Map<String, String> props, String schemaJson) {
      this.props = props;
      this.schemaJson = schemaJson;
    }

    @Override
    public Iterator<InternalRow> call(Iterator<Range> ranges) {
      ValueParser parser = new ValueParser(schemaJson);
      long stallMs = Long.parseLong(props.getOrDefault("sluice.stall.ms", "120000"));
      Pool.Lease lease = Pool.take(props);
      TaskContext task = TaskContext.get();
      if (task != null) {
        task.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> lease.close());
      }
      boolean inTask = task != null;
      return new Iterator<InternalRow>() {
        private Range range;
        private TopicPartition tp;
        private UTF8String topic;
        private Iterator<ConsumerRecord<byte[], byte[]>> polled = Collections.emptyIterator();
        private ConsumerRecord<byte[], byte[]> next;

        @Override
        public boolean hasNext() {
          if (next == null) {
            next = advance();
          }
          return next != null;
        }

        @Override
        public InternalRow next() {
          if (!hasNext()) {
            throw new NoSuchElementException();
          }
          ConsumerRecord<byte[], byte[]> r = next;
          next = null;
          return parser.row(topic, range.partition, r.offset(), r.value());
        }

        /** The range's next record, the next range's first, or null at the end (the lease is kept). */
        private ConsumerRecord<byte[], byte[]> advance() {
          KafkaConsumer<byte[], byte[]> c = lease.consumer;
          long lastProgress = System.currentTimeMillis();
          long lastPosition = -1;
          boolean asked = false;  // whether the broker was asked if the stalled range exists
          while (true) {
            if (range == null) {
              if (!ranges.hasNext()) {
                lease.done();
                if (!inTask) {
                  lease.close();  // no task to close it at its end (not on an executor)
                }
                return null;
              }
              range = ranges.next();
              tp = new TopicPartition(range.topic, range.partition);
              topic = UTF8String.fromString(range.topic);
              c.assign(Collections.singletonList(tp));
              c.seek(tp, range.start);
              polled = Collections.emptyIterator();
            }
            if (polled.hasNext()) {
              ConsumerRecord<byte[], byte[]> r = polled.next();
              if (r.offset() < range.end) {
                return r;
              }
              range = null;  // past the range: the next one
              continue;
            }
            long position = c.position(tp);
            if (position >= range.end) {
              range = null;
              continue;
            }
            long now = System.currentTimeMillis();
            if (position != lastPosition) {
              lastPosition = position;
              lastProgress = now;
              asked = false;
            } else if (!asked && now - lastProgress > Math.min(stallMs, 3000)) {
              asked = true;
              if (!exists(c, range)) {
                throw new IllegalStateException("Kafka store: cannot read " + range + ": the broker knows no such "
                    + "topic partition (deleted?); nothing was acked");
              }
            } else if (now - lastProgress > stallMs) {
              throw new IllegalStateException("Kafka store: cannot read " + range + ": no record past offset "
                  + position + " in " + stallMs / 1000 + " s (an open transaction before it, or the broker "
                  + "is unreachable); nothing was acked");
            }
            try {
              polled = c.poll(Duration.ofMillis(500)).records(tp).iterator();
            } catch (OffsetOutOfRangeException e) {
              throw new IllegalStateException("Kafka store: cannot read " + range + ": offset " + position
                  + " is outside the partition's log (retention deleted records the group had not acked, or "
                  + "the topic was deleted and created again); nothing was acked", e);
            }
          }
        }
      };
    }
  }

  /** Whether the broker has the range's topic partition (asked once a range stalls). */
  private static boolean exists(KafkaConsumer<byte[], byte[]> c, Range range) {
    List<org.apache.kafka.common.PartitionInfo> parts;
    try {
      parts = c.partitionsFor(range.topic, Duration.ofSeconds(10));
    } catch (org.apache.kafka.common.errors.TimeoutException e) {
      return true;  // no answer: the stall's own deadline decides
    }
    return parts != null && parts.stream().anyMatch(p -> p.partition() == range.partition);
  }

  /** Consumers kept per executor and client settings between tasks. */
  static final class Pool {
    private static final int KEEP = 8;
    private static final java.util.concurrent.atomic.AtomicInteger CLIENTS = new java.util.concurrent.atomic.AtomicInteger();
    private static final Map<Map<String, String>, ConcurrentLinkedDeque<KafkaConsumer<byte[], byte[]>>> IDLE =
        new ConcurrentHashMap<>();

    private Pool() {}

    /** A consumer for these settings (an idle one, or a new one). */
    static Lease take(Map<String, String> props) {
      KafkaConsumer<byte[], byte[]> c = IDLE.computeIfAbsent(props, k -> new ConcurrentLinkedDeque<>()).pollFirst();
      return new Lease(props, c != null ? c : open(props));
    }

    private static KafkaConsumer<byte[], byte[]> open(Map<String, String> props) {
      Map<String, Object> conf = new HashMap<>();
      conf.put("isolation.level", "read_committed");
      conf.put("enable.auto.commit", "false");
      conf.put("auto.offset.reset", "none");
      conf.put("allow.auto.create.topics", "false");  // a deleted topic must not come back empty
      conf.put("client.id", "sluice-job-" + CLIENTS.incrementAndGet());  // one id per consumer (metrics, MBeans)
      // larger fetches than the defaults (500 records a poll, 1 MiB a partition), and no wait at
      // a range's end (its last offset is a commit marker: the broker would hold the fetch 500 ms)
      conf.put("max.poll.records", "10000");
      conf.put("max.partition.fetch.bytes", String.valueOf(16 << 20));
      conf.put("fetch.max.bytes", String.valueOf(64 << 20));
      conf.put("fetch.max.wait.ms", "10");
      for (Map.Entry<String, String> e : props.entrySet()) {
        if (!e.getKey().startsWith("sluice.")) {
          conf.put(e.getKey(), e.getValue());
        }
      }
      return new KafkaConsumer<>(conf, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    /** A borrowed consumer: back to the pool when its task read everything, else closed. */
    static final class Lease {
      final KafkaConsumer<byte[], byte[]> consumer;
      private final Map<String, String> props;
      private boolean done;
      private boolean closed;

      Lease(Map<String, String> props, KafkaConsumer<byte[], byte[]> consumer) {
        this.props = props;
        this.consumer = consumer;
      }

      void done() {
        done = true;
      }

      synchronized void close() {
        if (closed) {
          return;
        }
        closed = true;
        ConcurrentLinkedDeque<KafkaConsumer<byte[], byte[]>> idle = IDLE.get(props);
        if (done && idle != null) {
          consumer.unsubscribe();
          synchronized (idle) {
            if (idle.size() < KEEP) {
              idle.addFirst(consumer);
              return;
            }
          }
        }
        consumer.close(Duration.ofSeconds(5));
      }
    }
  }
}
