// A server or `worker` process started while PostgreSQL is unreachable
// (starting, restarting, failing over) waits for it instead of exiting.
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/kernel/config.js";
import { openStorage } from "../../src/server/open-storage.js";
import { createScratchSchema, dropScratchSchema } from "../../src/infra/storage/scratch-schema.js";
import { TEST_DATABASE_URL } from "../helpers/db.js";
import { freePort } from "../infra/queue/jetstream-helpers.js";

const sockets = new Set<Socket>();
let proxy: Server | undefined;
let schema: string | undefined;
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((r) => (proxy ? proxy.close(r) : r(undefined)));
  if (schema) await dropScratchSchema(TEST_DATABASE_URL, schema);
});

/** A TCP forwarder to the real PostgreSQL, opened on `port` only when called. */
function openProxy(port: number): Promise<void> {
  const target = new URL(TEST_DATABASE_URL);
  proxy = createServer((client) => {
    const upstream = createConnection(Number(target.port || 5432), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  return new Promise((r) => proxy!.listen(port, "127.0.0.1", () => r()));
}

describe("opening PostgreSQL at start-up", () => {
  it("retries while the database is unreachable and opens (with migrations) once it is back", async () => {
    schema = await createScratchSchema(TEST_DATABASE_URL, "pbstart");
    const port = await freePort();
    const url = new URL(TEST_DATABASE_URL);
    url.host = `127.0.0.1:${port}`;
    url.searchParams.set("options", `-c search_path=${schema},public`);
    const config = loadConfig({ DATABASE_URL: url.toString(), PULSEBASE_DATA_DIR: "/nonexistent-pulsebase-test" });

    const retries: number[] = [];
    const opening = openStorage(config, "worker", (err, attempt) => {
      expect((err as Error).message).toMatch(/unreachable/);
      retries.push(attempt);
      if (attempt === 2) void openProxy(port);
    });
    const sql = await opening;
    try {
      expect(retries.length).toBeGreaterThanOrEqual(2);
      const r = await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'analytics_events'", [schema]);
      expect(r.rows[0]!.n).toBe(1);
    } finally {
      await sql.close();
    }
  }, 30_000);
});
