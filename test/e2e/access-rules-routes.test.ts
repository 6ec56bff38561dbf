// Issue 31, point 4: the same access rules on every route a device can
// reach the database by, on a real server: REST, Connect JSON and binary, gRPC and gRPC-Web, over HTTP/1.1
// and h2; single queries, batches and transactions; the point-read path
// (the same read twice: the second is served in the service process).
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccessRulesService } from "../../gen/pulsebase/admin/v1/access_rules_pb.js";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { SqlService } from "../../gen/pulsebase/admin/v1/sql_pb.js";
import { DatabaseService } from "../../gen/pulsebase/platform/v1/database_pb.js";
import { jsonToValue } from "../../src/capabilities/database/proto-values.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let cert: Buffer;
let alice: string;
let bob: string;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  cert = await readFile(join(s.dataDir, "tls", "cert.pem"));
  const app = await s.createApp("rules routes");
  alice = (await s.register(app.appKey, { user_id: "alice" })).token;
  bob = (await s.register(app.appKey, { user_id: "bob" })).token;
  const dbs = s.adminClient(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId: app.teamId, name: "main" });
  await dbs.linkDatabase({ databaseId: db.id, appId: app.appId });
  await s.adminClient(SqlService).runSql({
    appId: app.appId,
    sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, owner_id TEXT NOT NULL, body TEXT); INSERT INTO notes VALUES (1, 'alice', 'a'), (2, 'bob', 'b secret')",
  });
  await s.adminClient(AccessRulesService).setAccessRules({
    appId: app.appId,
    mode: "rules",
    tables: [{ table: "notes", select: "owner_id = :user_id", insert: "owner_id = :user_id", update: "owner_id = :user_id" }],
  });
});
afterAll(async () => {
  await s?.close();
});

const nodeOptions = () => ({ ca: cert, checkServerIdentity: () => undefined });
const TRANSPORTS: Record<string, () => Transport> = {
  "Connect JSON, HTTP/1.1": () => createConnectTransport({ baseUrl: s.httpsUrl, httpVersion: "1.1", nodeOptions: nodeOptions() }),
  "Connect binary, h2": () => createConnectTransport({ baseUrl: s.httpsUrl, httpVersion: "2", useBinaryFormat: true, nodeOptions: nodeOptions() }),
  gRPC: () => createGrpcTransport({ baseUrl: s.httpsUrl, nodeOptions: nodeOptions() }),
  "gRPC-Web, HTTP/1.1": () => createGrpcWebTransport({ baseUrl: s.httpsUrl, httpVersion: "1.1", nodeOptions: nodeOptions() }),
};

const plain = (rows: { values: { kind: { value?: unknown } }[] }[]) => rows.map((r) => r.values.map((v) => v.kind.value ?? null));

describe("every RPC route applies the caller's rules", () => {
  for (const [name, make] of Object.entries(TRANSPORTS)) {
    it(name, async () => {
      const client = createClient(DatabaseService, make());
      const as = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
      for (let i = 0; i < 2; i++) {
        const a = await client.query({ sql: "SELECT id, body FROM notes WHERE id = ?", params: jsonToValue([2]) }, as(alice));
        expect(plain(a.results[0]!.rows)).toEqual([]);
        const b = await client.query({ sql: "SELECT id, body FROM notes WHERE id = ?", params: jsonToValue([2]) }, as(bob));
        expect(plain(b.results[0]!.rows)).toEqual([[2, "b secret"]]);
      }
      const all = await client.query({ sql: "SELECT count(*) FROM notes" }, as(alice));
      expect(plain(all.results[0]!.rows)).toEqual([[1]]);
      const tx = await client.batch(
        { transaction: true, statements: [{ sql: "UPDATE notes SET body = 'x'" }, { sql: "INSERT INTO notes (owner_id, body) VALUES ('bob', 'forged')" }] },
        as(alice),
      );
      expect(tx.results.at(-1)!.error).toMatch(/^access rule: insert on notes refused/);
      const after = await client.query({ sql: "SELECT body FROM notes" }, as(bob));
      expect(plain(after.results[0]!.rows)).toEqual([["b secret"]]);
    });
  }
});

describe("REST applies the caller's rules", () => {
  const post = (path: string, token: string, body: unknown) =>
    s.fetch(path, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify(body) });

  it("on /api/db/query (the JSON fast path and the point read) and /api/db/batch", async () => {
    for (let i = 0; i < 2; i++) {
      const r = await post("/api/db/query", alice, { sql: "SELECT id, body FROM notes WHERE id = ?", params: [2] });
      expect(r.status).toBe(200);
      expect((await r.json()).results[0].rows).toEqual([]);
    }
    const mine = await (await post("/api/db/query", alice, { sql: "SELECT id, body FROM notes" })).json();
    expect(mine.results[0].rows).toEqual([[1, "a"]]);
    const batch = await (await post("/api/db/batch", bob, { statements: [{ sql: "SELECT body FROM notes" }, { sql: "DELETE FROM notes" }] })).json();
    expect(batch.results[0].rows).toEqual([["b secret"]]);
    expect(batch.results[1].error).toBe("access rule: delete on notes is not allowed");
    const ddl = await post("/api/db/query", alice, { sql: "DROP TABLE notes" });
    expect(ddl.status).toBe(403);
    expect((await ddl.json()).error).toBe("forbidden_query");
  });
});
