// The operator API (admin DatabaseService) and what devices notice of it.
import { existsSync } from "node:fs";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseKind, DatabaseStatus } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { canTransition, DATABASE_STATUSES, TRANSITIONS } from "../../../src/capabilities/database/database-status.js";
import { failure } from "./errors.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";

for (const kind of ["postgres", "pglite"] as const) {
  describe(`linked databases (${kind})`, () => {
    let h: Harness;
    beforeAll(async () => {
      h = await createHarness({ kind });
    });
    afterAll(async () => h?.close());

    it("creates an embedded database: provisioned, active, a WAL file in the data directory", async () => {
      const team = await h.team();
      const db = await h.admin.createDatabase({ teamId: BigInt(team), name: "main" });
      expect(db.status).toBe(DatabaseStatus.ACTIVE);
      expect(db.kind).toBe(DatabaseKind.EMBEDDED);
      expect(db.filePath).toMatch(/^databases\/\d+-[0-9a-f]+\.db$/);
      const path = join(h.dataDir, db.filePath);
      expect(existsSync(path)).toBe(true);
      // the library every connection of this process uses (point-reader.ts)
      const { DatabaseSync } = await import("node:sqlite");
      const raw = new DatabaseSync(path, { readOnly: true });
      expect(raw.prepare("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
      raw.close();
      const got = await h.admin.getDatabase({ id: db.id });
      expect(got.name).toBe("main");
      const list = await h.admin.listDatabases({ teamId: BigInt(team) });
      expect(list.databases.map((d) => d.id)).toEqual([db.id]);
    });

    it("validates create requests and refuses an unreachable remote server (left pending with the reason)", async () => {
      const team = await h.team();
      expect(await failure(h.admin.createDatabase({ teamId: BigInt(team), name: "" }))).toMatchObject({ http: 422, fields: { name: [expect.any(String)] } });
      expect(await failure(h.admin.createDatabase({ teamId: BigInt(team), name: "r", kind: DatabaseKind.REMOTE, url: "ftp://x" }))).toMatchObject({
        http: 422,
        fields: { url: [expect.any(String)] },
      });
      const db = await h.admin.createDatabase({ teamId: BigInt(team), name: "r", kind: DatabaseKind.REMOTE, url: "http://127.0.0.1:1", authToken: "t" });
      expect(db.status).toBe(DatabaseStatus.PENDING);
      expect(db.statusMessage).toMatch(/provisioning failed/);
      expect(db.url).toBe("http://127.0.0.1:1");
    });

    it("follows the status machine and refuses other transitions", async () => {
      expect(canTransition("pending", "active")).toBe(false);
      expect(canTransition("active", "suspended")).toBe(true);
      for (const s of DATABASE_STATUSES) expect(TRANSITIONS[s].every((t) => DATABASE_STATUSES.includes(t))).toBe(true);
      const team = await h.team();
      const db = await h.admin.createDatabase({ teamId: BigInt(team), name: "m" });
      expect(await failure(h.admin.resumeDatabase({ id: db.id }))).toMatchObject({ code: "failed_precondition", http: 409 });
      expect((await h.admin.suspendDatabase({ id: db.id })).status).toBe(DatabaseStatus.SUSPENDED);
      expect(await failure(h.admin.suspendDatabase({ id: db.id }))).toMatchObject({ code: "failed_precondition" });
      expect(await failure(h.admin.provisionDatabase({ id: db.id }))).toMatchObject({ code: "failed_precondition" });
      expect((await h.admin.resumeDatabase({ id: db.id })).status).toBe(DatabaseStatus.ACTIVE);
      expect(await failure(h.admin.getDatabase({ id: 987654321n }))).toMatchObject({ code: "not_found", http: 404 });
    });

    it("answers each status of a linked database as the spec says", async () => {
      const team = await h.team();
      const app = await h.app(team);
      expect(await failure(h.query(app, "SELECT 1"))).toMatchObject({ code: "database_not_linked", http: 403 });
      // 422 still comes first
      expect(await failure(h.query(app, ""))).toMatchObject({ http: 422 });

      // pending (a remote database whose provisioning failed)
      const pending = await h.admin.createDatabase({ teamId: BigInt(team), name: "p", kind: DatabaseKind.REMOTE, url: "http://127.0.0.1:1" });
      await h.admin.linkDatabase({ databaseId: pending.id, appId: BigInt(app) });
      expect(await failure(h.query(app, "SELECT 1"))).toMatchObject({ code: "database_unavailable", http: 503 });
      // the guard answers before the status
      expect(await failure(h.query(app, "VACUUM"))).toMatchObject({ code: "forbidden_query", http: 403 });
      await h.admin.unlinkDatabase({ databaseId: pending.id, appId: BigInt(app) });

      const db = await h.admin.createDatabase({ teamId: BigInt(team), name: "s" });
      await h.admin.linkDatabase({ databaseId: db.id, appId: BigInt(app) });
      expect(rowsOf((await h.query(app, "SELECT 7")).results[0])).toEqual([[7]]);
      await h.admin.suspendDatabase({ id: db.id });
      expect(await failure(h.query(app, "SELECT 1"))).toMatchObject({ code: "database_unavailable", http: 503 });
      await h.admin.resumeDatabase({ id: db.id });
      expect(rowsOf((await h.query(app, "SELECT 8")).results[0])).toEqual([[8]]);

      // deleting while linked: unavailable, file kept until the last link goes
      const deleting = await h.admin.deleteDatabase({ id: db.id });
      expect(deleting.status).toBe(DatabaseStatus.DELETING);
      expect(existsSync(join(h.dataDir, deleting.filePath))).toBe(true);
      expect(await failure(h.query(app, "SELECT 1"))).toMatchObject({ code: "database_unavailable", http: 503 });
      expect(await failure(h.admin.linkDatabase({ databaseId: db.id, appId: BigInt(await h.app(team)) }))).toMatchObject({ code: "failed_precondition" });
      const deleted = await h.admin.unlinkDatabase({ databaseId: db.id, appId: BigInt(app) });
      expect(deleted.status).toBe(DatabaseStatus.DELETED);
      expect(existsSync(join(h.dataDir, deleted.filePath))).toBe(false);
      expect(existsSync(join(h.dataDir, `${deleted.filePath}-wal`))).toBe(false);
      expect(await failure(h.query(app, "SELECT 1"))).toMatchObject({ code: "database_not_linked" });
      expect((await h.admin.listDatabases({ teamId: BigInt(team) })).databases.map((d) => d.id)).not.toContain(db.id);
      expect((await h.admin.listDatabases({ teamId: BigInt(team), includeDeleted: true })).databases.map((d) => d.id)).toContain(db.id);
    });

    it("answers 503 while a linked database is still pending or provisioning", async () => {
      const team = await h.team();
      const app = await h.app(team);
      const rec = await h.module.store.create({ teamId: team, name: "slow", kind: "embedded" });
      await h.module.manager.link(rec.id, app);
      expect(await failure(h.query(app, "SELECT 1"))).toMatchObject({ code: "database_unavailable", http: 503 });
      expect((await h.module.store.transition(rec.id, "provisioning"))?.status).toBe("provisioning");
      expect(await failure(h.query(app, "SELECT 1"))).toMatchObject({ code: "database_unavailable", http: 503 });
      // provisioning -> suspended is not a transition
      expect(await h.module.store.transition(rec.id, "suspended")).toBeUndefined();
      expect(await failure(h.admin.suspendDatabase({ id: BigInt(rec.id) }))).toMatchObject({ code: "failed_precondition" });
    });

    it("answers 500 query_error when an active remote database's server is down", async () => {
      const team = await h.team();
      const app = await h.app(team);
      const rec = await h.module.store.create({ teamId: team, name: "down", kind: "remote", url: "http://127.0.0.1:1", authToken: "t" });
      await h.module.store.transition(rec.id, "provisioning");
      await h.module.store.transition(rec.id, "active"); // as if the server had answered then
      await h.module.manager.link(rec.id, app);
      expect(await failure(h.query(app, "SELECT 1"))).toMatchObject({ code: "query_error", http: 500 });
    });

    it("deletes an unlinked database at once", async () => {
      const team = await h.team();
      const db = await h.admin.createDatabase({ teamId: BigInt(team), name: "gone" });
      const res = await h.admin.deleteDatabase({ id: db.id });
      expect(res.status).toBe(DatabaseStatus.DELETED);
      expect(existsSync(join(h.dataDir, db.filePath))).toBe(false);
      expect(await failure(h.admin.deleteDatabase({ id: db.id }))).toMatchObject({ code: "failed_precondition" });
    });

    it("lets two applications of a team share one database; an app links at most one", async () => {
      const team = await h.team();
      const a = await h.app(team);
      const b = await h.app(team);
      const db = await h.admin.createDatabase({ teamId: BigInt(team), name: "shared" });
      await h.admin.linkDatabase({ databaseId: db.id, appId: BigInt(a) });
      const linked = await h.admin.linkDatabase({ databaseId: db.id, appId: BigInt(b) });
      expect(linked.linkedAppIds).toEqual([BigInt(a), BigInt(b)].sort((x, y) => Number(x - y)));
      await h.query(a, "CREATE TABLE notes (t TEXT); INSERT INTO notes VALUES ('from a')");
      expect(rowsOf((await h.query(b, "SELECT t FROM notes")).results[0])).toEqual([["from a"]]);
      // linking again to the same database is a no-op; to another one is a conflict
      await h.admin.linkDatabase({ databaseId: db.id, appId: BigInt(a) });
      const other = await h.admin.createDatabase({ teamId: BigInt(team), name: "other" });
      expect(await failure(h.admin.linkDatabase({ databaseId: other.id, appId: BigInt(a) }))).toMatchObject({ code: "conflict", http: 409 });
      expect(await failure(h.admin.unlinkDatabase({ databaseId: other.id, appId: BigInt(a) }))).toMatchObject({ code: "not_found" });
    });

    it("refuses linking an application of another team", async () => {
      const team = await h.team();
      const otherTeam = await h.team();
      const stranger = await h.app(otherTeam);
      const db = await h.admin.createDatabase({ teamId: BigInt(team), name: "private" });
      expect(await failure(h.admin.linkDatabase({ databaseId: db.id, appId: BigInt(stranger) }))).toMatchObject({ code: "permission_denied", http: 403 });
      expect(await failure(h.query(stranger, "SELECT 1"))).toMatchObject({ code: "database_not_linked" });
    });

    it("answers 500 query_error when the database file is not readable as a database", async () => {
      const team = await h.team();
      const app = await h.app(team);
      const db = await h.admin.createDatabase({ teamId: BigInt(team), name: "broken" });
      const path = join(h.dataDir, db.filePath);
      await writeFile(path, "this is not a database file".repeat(200));
      await rm(`${path}-wal`, { force: true });
      await rm(`${path}-shm`, { force: true });
      await h.admin.linkDatabase({ databaseId: db.id, appId: BigInt(app) });
      expect(await failure(h.query(app, "SELECT 1"))).toMatchObject({ code: "query_error", http: 500 });
    });
  });
}
