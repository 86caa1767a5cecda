// canal's own Kafka client (canal.client 1.1.7, KafkaCanalConnector in flatMessage mode) reads a topic
// and prints one line per FlatMessage it parsed: database, table, type, isDdl, rows, id, es, old rows.
// Used by tests/e2e/test_kafka_canal_client.py on topics Sluice's capture wrote.
// Usage: java -cp <canal client jars>:. ReadFlat <bootstrap> <topic> <partition or -1> <groupId> <expected records>
import com.alibaba.otter.canal.client.kafka.KafkaCanalConnector;
import com.alibaba.otter.canal.protocol.FlatMessage;

import java.util.List;
import java.util.concurrent.TimeUnit;

public class ReadFlat {
    public static void main(String[] args) throws Exception {
        String servers = args[0], topic = args[1], group = args[3];
        int partition = Integer.parseInt(args[2]);
        long expected = Long.parseLong(args[4]);
        KafkaCanalConnector c = new KafkaCanalConnector(servers, topic, partition < 0 ? null : partition, group,
                                                        1000, true);
        c.setSessionTimeout(30L, TimeUnit.SECONDS);
        c.connect();
        c.subscribe();
        long seen = 0, idle = 0;
        while (seen < expected && idle < 30) {
            List<FlatMessage> got = c.getFlatListWithoutAck(2L, TimeUnit.SECONDS);
            if (got == null || got.isEmpty()) {
                idle++;
                continue;
            }
            idle = 0;
            for (FlatMessage m : got) {
                seen++;
                int rows = m.getData() == null ? 0 : m.getData().size();
                int old = m.getOld() == null ? 0 : m.getOld().size();
                System.out.println("FLAT\t" + m.getDatabase() + "\t" + m.getTable() + "\t" + m.getType() + "\t"
                                   + m.getIsDdl() + "\t" + rows + "\t" + m.getId() + "\t" + m.getEs() + "\t" + old
                                   + "\t" + (m.getPkNames() == null ? "" : String.join(",", m.getPkNames())));
            }
            c.ack();
        }
        c.unsubscribe();
        c.disconnect();
        System.out.println("DONE\t" + seen);
    }
}
