// Issue 15, points 3-5, through the whole server over HTTPS: what a hostile
// device token of one application gets back (the documented envelope and
// status), and that another application is answered normally meanwhile.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let attacker: string;
let bystander: string;

const post = (path: string, body: unknown, tok: string) =>
  s.fetch(path, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${tok}` }, body: JSON.stringify(body) });
const sql = async (tok: string, q: string, params?: unknown) => {
  const r = await post("/api/db/query", params === undefined ? { sql: q } : { sql: q, params }, tok);
  return { status: r.status, body: await r.json() };
};

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  const dbs = s.adminClient(AdminDatabaseService);
  for (const name of ["attacker", "bystander"]) {
    const app = await s.createApp(name);
    const db = await dbs.createDatabase({ teamId: app.teamId, name: "main" });
    await dbs.linkDatabase({ databaseId: db.id, appId: app.appId });
    const { token } = await s.register(app.appKey);
    if (name === "attacker") attacker = token;
    else bystander = token;
  }
  for (const tok of [attacker, bystander]) {
    expect((await sql(tok, "CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)")).status).toBe(200);
    expect((await sql(tok, "INSERT INTO kv VALUES (1, 'one')")).status).toBe(200);
  }
}, 60_000);
afterAll(() => s.close());

describe("raw pages and other applications' statements", () => {
  it("answers 403 forbidden_query to a page write and to sqlite_stmt, and the file stays sound", async () => {
    const page = await sql(attacker, "UPDATE sqlite_dbpage SET data = zeroblob(4096) WHERE pgno = 1");
    expect(page.status).toBe(403);
    expect(page.body).toEqual({ error: "forbidden_query", message: expect.stringMatching(/sqlite_dbpage/) });
    const stmt = await sql(attacker, "SELECT sql FROM sqlite_stmt");
    expect(stmt.status).toBe(403);
    expect(stmt.body.error).toBe("forbidden_query");
    expect((await sql(attacker, "SELECT v FROM kv WHERE id = ?", [1])).body.results[0].rows).toEqual([["one"]]);
  });
});

describe("the issue's schema attack", () => {
  const cols = (n: number) => Array.from({ length: n }, (_, i) => `c${i} INTEGER DEFAULT ${i} CHECK (c${i} >= 0)`).join(", ");

  it("refuses 1,500-column tables, and schema changes alternated with point reads leave the event loop free", async () => {
    const wide = await sql(attacker, `CREATE TABLE w0 (id INTEGER PRIMARY KEY, ${cols(1500)})`);
    expect(wide.status).toBe(200);
    expect(wide.body.results[0].error).toMatch(/too many columns: a table may have at most 100 columns/);
    // as far as the caps let it go: tables of 90 columns until the schema is full
    let made = 0;
    let refused = false;
    for (let t = 1; t < 60; t++) {
      const r = await sql(attacker, `CREATE TABLE w${t} (id INTEGER PRIMARY KEY, ${cols(90)})`);
      if (r.body.results[0].error) {
        expect(r.body.results[0].error).toMatch(/schema too large/);
        refused = true;
        break;
      }
      made++;
    }
    expect(made).toBeGreaterThan(5);
    expect(refused).toBe(true);
    // What the attacker can make the service thread load (the point reader
    // compiles against the schema after each change) is bounded by the caps,
    // not by the attacker: at most 64 KiB of definitions in 256 objects,
    // which loads in a millisecond or two. (A size, not a time: the time is
    // the bench's; over the caps the reader never loads it, schema-caps.test.ts.)
    const withinCaps = async () => {
      const [bytes, objects] = (await sql(attacker, "SELECT coalesce(sum(length(sql)), 0), count(*) FROM sqlite_schema")).body.results[0].rows[0] as [number, number];
      expect(bytes).toBeLessThanOrEqual(64 * 1024);
      expect(objects).toBeLessThanOrEqual(256);
    };
    await withinCaps();
    for (let i = 0; i < 15; i++) {
      await sql(attacker, `ALTER TABLE kv ADD COLUMN x${i} INTEGER`); // refused at the cap or not: the schema moves or stays
      await sql(attacker, `DROP TABLE IF EXISTS w${made - i}`);
      expect((await sql(attacker, "SELECT v FROM kv WHERE id = ?", [1])).body.results[0].rows).toEqual([["one"]]);
      expect((await sql(bystander, "SELECT v FROM kv WHERE id = ?", [1])).body.results[0].rows).toEqual([["one"]]);
    }
    // (the ALTERs grow it only as far as the caps let them)
    await withinCaps();
  }, 60_000);
});

describe("engine memory", () => {
  it("answers 400 query_too_large in the envelope when a request takes the engine over its memory", async () => {
    // 40 values of 15 MB in one row: each under the value cap, 600 MB together
    const r = await sql(attacker, `SELECT ${Array.from({ length: 40 }, () => "zeroblob(15000000)").join(", ")}`);
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ error: "query_too_large", message: expect.stringMatching(/512 MiB/) });
    expect((await sql(bystander, "SELECT count(*) FROM kv")).body.results[0].rows).toEqual([[1]]);
    const big = await sql(attacker, "SELECT length(randomblob(1000000000))");
    expect(big.status).toBe(200);
    expect(big.body.results[0].error).toMatch(/string or blob too big/);
  }, 30_000);
});
