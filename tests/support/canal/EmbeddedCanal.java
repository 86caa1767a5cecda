// canal-server's MQ path without canal's launcher (canal.deployer 1.1.7 is not on Maven Central): an
// embedded canal instance (canal.server's CanalServerWithEmbedded running a CanalInstanceWithManager,
// 1.1.7) reads the source's binlog from a given position, and canal's own Kafka producer
// (connector.kafka's CanalKafkaProducer: MQMessageUtils.messageConverter to FlatMessages, messagePartition
// over canal.mq.partitionsNum by canal.mq.partitionHash, fastjson2 with WriteNulls) publishes every batch,
// which is acked when the producer commits -- as canal-server's CanalMQStarter worker does. Only this
// wiring is ours. Used by tests/e2e/test_kafka_canal_server.py through tests/support/canal_client.py.
//
// Usage: java -cp <canal server jars>:. EmbeddedCanal <properties file>
// Keys are canal's (instance.properties / canal.properties): canal.instance.master.address (host:port),
// canal.instance.master.journal.name, canal.instance.master.position, canal.instance.dbUsername,
// canal.instance.dbPassword, canal.instance.filter.regex, canal.instance.gtidon, canal.mq.topic,
// canal.mq.partitionsNum, canal.mq.partitionHash, canal.mq.flatMessage, canal.mq.database.hash, kafka.*;
// and ours: sluice.until.journal/sluice.until.position (stop once a published entry ends there or later),
// sluice.idle.seconds (stop that long after the last batch), sluice.max.seconds (give up: exit 3).
// Prints one BATCH line per published batch and DONE <batches> <entries>.
import com.alibaba.otter.canal.connector.core.producer.MQDestination;
import com.alibaba.otter.canal.connector.core.util.Callback;
import com.alibaba.otter.canal.connector.kafka.producer.CanalKafkaProducer;
import com.alibaba.otter.canal.instance.manager.CanalInstanceWithManager;
import com.alibaba.otter.canal.instance.manager.model.Canal;
import com.alibaba.otter.canal.instance.manager.model.CanalParameter;
import com.alibaba.otter.canal.protocol.CanalEntry;
import com.alibaba.otter.canal.protocol.ClientIdentity;
import com.alibaba.otter.canal.protocol.Message;
import com.alibaba.otter.canal.server.embedded.CanalServerWithEmbedded;
import com.google.protobuf.ByteString;

import java.io.FileInputStream;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

public class EmbeddedCanal {
    static final String DESTINATION = "sluice";

    static Canal canal(Properties p) {
        CanalParameter c = new CanalParameter();
        c.setMetaMode(CanalParameter.MetaMode.MEMORY);
        c.setIndexMode(CanalParameter.IndexMode.MEMORY);
        c.setHaMode(CanalParameter.HAMode.HEARTBEAT);
        c.setStorageMode(CanalParameter.StorageMode.MEMORY);
        c.setSourcingType(CanalParameter.SourcingType.MYSQL);
        String[] hp = p.getProperty("canal.instance.master.address").split(":");
        c.setDbAddresses(Collections.singletonList(new InetSocketAddress(hp[0], Integer.parseInt(hp[1]))));
        c.setDbUsername(p.getProperty("canal.instance.dbUsername"));
        c.setDbPassword(p.getProperty("canal.instance.dbPassword"));
        c.setMasterLogfileName(p.getProperty("canal.instance.master.journal.name"));
        c.setMasterLogfileOffest(Long.valueOf(p.getProperty("canal.instance.master.position")));
        c.setSlaveId(Long.valueOf(p.getProperty("canal.instance.mysql.slaveId", "1234")));
        c.setGtidEnable(Boolean.valueOf(p.getProperty("canal.instance.gtidon", "false")));
        c.setDetectingEnable(false);
        c.setConnectionCharset("UTF-8");
        // canal-server's default canal.instance.tsdb.enable=true needs spring/tsdb/*.xml, which only the
        // deployer ships; without it canal reads table metadata from the live source, as with tsdb off.
        c.setTsdbEnable(false);
        Canal canal = new Canal();
        canal.setId(1L);
        canal.setName(DESTINATION);
        canal.setCanalParameter(c);
        return canal;
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            p.load(in);
        }
        String untilJournal = p.getProperty("sluice.until.journal");
        long untilPos = Long.parseLong(p.getProperty("sluice.until.position", "0"));
        long idleMs = (long) (Double.parseDouble(p.getProperty("sluice.idle.seconds", "0")) * 1000);
        long maxMs = (long) (Double.parseDouble(p.getProperty("sluice.max.seconds", "120")) * 1000);

        CanalServerWithEmbedded server = CanalServerWithEmbedded.instance();
        server.setCanalInstanceGenerator(
            dest -> new CanalInstanceWithManager(canal(p), p.getProperty("canal.instance.filter.regex")));
        server.start();
        server.start(DESTINATION);
        ClientIdentity client = new ClientIdentity(DESTINATION, (short) 1001, "");
        server.subscribe(client);

        CanalKafkaProducer producer = new CanalKafkaProducer();
        producer.init(p);
        MQDestination dest = new MQDestination();
        dest.setCanalDestination(DESTINATION);
        dest.setTopic(p.getProperty("canal.mq.topic"));
        String parts = p.getProperty("canal.mq.partitionsNum");
        dest.setPartitionsNum(parts == null ? null : Integer.valueOf(parts));
        dest.setPartitionHash(p.getProperty("canal.mq.partitionHash"));
        int batchSize = producer.getMqProperties().getBatchSize();
        long timeout = producer.getMqProperties().getFetchTimeout();

        long start = System.currentTimeMillis(), last = -1, batches = 0, entries = 0;
        int rc = 0;
        boolean reached = false;
        while (true) {
            Message m = server.getWithoutAck(client, batchSize, timeout, TimeUnit.MILLISECONDS);
            long id = m.getId();
            List<CanalEntry.Entry> got = new ArrayList<>();
            if (m.isRaw()) {
                for (ByteString b : m.getRawEntries()) {
                    got.add(CanalEntry.Entry.parseFrom(b));
                }
            } else {
                got.addAll(m.getEntries());
            }
            long now = System.currentTimeMillis();
            if (id != -1 && !got.isEmpty()) {
                AtomicBoolean acked = new AtomicBoolean(false);
                producer.send(dest, m, new Callback() {
                    @Override
                    public void commit() {
                        server.ack(client, id);
                        acked.set(true);
                    }

                    @Override
                    public void rollback() {
                        server.rollback(client, id);
                    }
                });
                if (!acked.get()) {
                    System.err.println("EmbeddedCanal: canal's producer rolled batch " + id + " back");
                    rc = 2;
                    break;
                }
                batches++;
                entries += got.size();
                last = now;
                CanalEntry.Header h = got.get(got.size() - 1).getHeader();
                long end = h.getLogfileOffset() + h.getEventLength();
                System.out.println("BATCH\t" + id + "\t" + got.size() + "\t" + h.getLogfileName() + "\t" + end);
                if (untilJournal != null && (h.getLogfileName().compareTo(untilJournal) > 0
                        || (h.getLogfileName().equals(untilJournal) && end >= untilPos))) {
                    reached = true;
                    break;
                }
            }
            if (idleMs > 0 && last > 0 && now - last >= idleMs) {
                break;
            }
            if (now - start >= maxMs) {
                System.err.println("EmbeddedCanal: gave up after " + maxMs + " ms (" + entries + " entries)");
                rc = 3;
                break;
            }
        }
        if (untilJournal != null && !reached && rc == 0) {
            rc = 3;
        }
        System.out.println("DONE\t" + batches + "\t" + entries);
        System.out.flush();
        server.unsubscribe(client);
        producer.stop();
        server.stop();
        System.exit(rc);
    }
}
