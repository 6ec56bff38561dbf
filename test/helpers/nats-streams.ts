// Removes the JetStream streams of a namespace (test and bench clean-up: each
// test file and bench run has its own namespace on the shared NATS).
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";

export async function deleteStreamsWithPrefix(url: string, prefix: string): Promise<string[]> {
  const nc = await connect({ servers: url });
  const deleted: string[] = [];
  try {
    const jsm = await jetstreamManager(nc);
    for await (const si of jsm.streams.list()) {
      if (si.config.name.startsWith(prefix)) {
        await jsm.streams.delete(si.config.name);
        deleted.push(si.config.name);
      }
    }
  } finally {
    await nc.close();
  }
  return deleted;
}
