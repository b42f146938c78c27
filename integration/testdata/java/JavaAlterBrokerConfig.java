import java.util.*;
import java.util.concurrent.*;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.config.ConfigResource;

// JavaAlterBrokerConfig sets one broker's dynamic configs with the Java
// Admin client, as kafka-configs.sh --entity-type brokers --entity-name ID
// --alter --add-config does (the Admin sends them to that broker). Args:
// bootstrap servers, a client properties file, the broker id, then
// key=value pairs. Prints "ok" or the error, exiting 1 on one. Run by
// integration/java_test.go's TestJavaClientSSL.
public class JavaAlterBrokerConfig {
    public static void main(String[] args) throws Exception {
        Properties props = JavaSecurityCheck.load(args[0], args[1]);
        List<AlterConfigOp> ops = new ArrayList<>();
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            ops.add(new AlterConfigOp(new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET));
        }
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, args[2]);
        try (Admin admin = Admin.create(props)) {
            admin.incrementalAlterConfigs(Map.of(broker, ops)).all().get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            System.out.println("refused: " + e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
            System.exit(1);
        }
        System.out.println("ok: altered broker " + args[2]);
    }
}
