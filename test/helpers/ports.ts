// A port nothing listens on at the moment of asking: for child processes
// (servers, nats-server) that must be told their port on the command line,
// and for "nothing answers here" tests. The kernel hands out ephemeral ports
// in turn, so another test taking the same one in between is unlikely.
import { createServer } from "node:net";

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}
