// Each application's egress policy (egress-policy-store.ts) on real
// PostgreSQL and on PGlite: the default without a row, validation naming the
// bad entries, normalised hosts, one application's policy never another's,
// the cache dropped on a change, and the row gone with its application.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorDetail } from "../../../src/kernel/errors.js";
import { createEgressPolicyStore, normalizeHost, type EgressPolicyStore } from "../../../src/capabilities/functions/egress-policy-store.js";
import { createApps, createTestDb, type TestDb } from "../../helpers/db.js";

describe("normalizeHost", () => {
  it("keeps host names, IP addresses and *. patterns in one form; refuses the rest", () => {
    expect(normalizeHost("API.Example.com.")).toBe("api.example.com");
    expect(normalizeHost("*.Example.com")).toBe("*.example.com");
    expect(normalizeHost("[::1]")).toBe("::1");
    // as fetch's URL writes the host it compares: an operator's long form still matches
    expect(normalizeHost("2001:0DB8:0000::0001")).toBe("2001:db8::1");
    expect(normalizeHost("[::FFFF:192.0.2.1]")).toBe("::ffff:c000:201");
    expect(normalizeHost("fe80::1%eth0")).toBeUndefined(); // a zone id names no host a URL can reach
    expect(normalizeHost("10.0.0.1")).toBe("10.0.0.1");
    for (const bad of ["", "https://a.com", "a.com/x", "a.com:443", "*.com", "*", "-a.com", "a..com", "a b.com", "x".repeat(64) + ".com", "*.*.a.com"]) {
      expect(normalizeHost(bad), bad).toBeUndefined();
    }
  });
});

for (const kind of ["postgres", "pglite"] as const) {
  describe(`egress policy store (${kind})`, () => {
    let db: TestDb;
    let store: EgressPolicyStore;
    let app1: number;
    let app2: number;

    beforeAll(async () => {
      db = await createTestDb(kind);
      [app1, app2] = await createApps(db, "one", "two");
      store = createEgressPolicyStore(db.sql, 60_000);
    });
    afterAll(() => db.drop());

    it("answers the default without a row, then what was set (normalised, without duplicates), for that application only", async () => {
      expect(await store.get(app1)).toEqual({ allowHosts: [], allowPrivate: false });
      const set = await store.set(app1, { allowHosts: ["API.example.com", "*.mail.example.org", "api.example.com."], allowPrivate: true });
      expect(set).toMatchObject({ allowHosts: ["api.example.com", "*.mail.example.org"], allowPrivate: true });
      expect(set.updatedAt).toBeInstanceOf(Date);
      expect(await store.get(app1)).toMatchObject({ allowHosts: ["api.example.com", "*.mail.example.org"], allowPrivate: true });
      expect(await store.get(app2)).toEqual({ allowHosts: [], allowPrivate: false });
    });

    it("refuses entries that are not hosts, naming each, and changes nothing", async () => {
      await store.set(app2, { allowHosts: ["ok.example.com"], allowPrivate: false });
      const err = await store.set(app2, { allowHosts: ["fine.com", "http://x.com", "*.com"], allowPrivate: true }).catch((e: unknown) => e);
      const d = errorDetail(err);
      expect(d?.code).toBe("validation_failed");
      expect(d?.fieldViolations.map((v) => v.field).sort()).toEqual(["allow_hosts[1]", "allow_hosts[2]"]);
      const tooMany = await store.set(app2, { allowHosts: Array.from({ length: 101 }, (_, i) => `h${i}.example.com`), allowPrivate: false }).catch((e: unknown) => e);
      expect(errorDetail(tooMany)?.fieldViolations[0]?.field).toBe("allow_hosts");
      expect(await store.get(app2)).toMatchObject({ allowHosts: ["ok.example.com"], allowPrivate: false });
    });

    it("serves the sandbox from its cache, dropped by a change here or an announced one", async () => {
      await store.set(app2, { allowHosts: [], allowPrivate: false });
      expect(await store.policyOf(app2)).toEqual({ allowHosts: [], allowPrivate: false });
      // another process's change: the row changes under the cache
      await db.sql.query("UPDATE function_egress_policies SET allow_private = true WHERE app_id = $1", [app2]);
      expect((await store.policyOf(app2)).allowPrivate).toBe(false);
      store.invalidate(app2);
      expect((await store.policyOf(app2)).allowPrivate).toBe(true);
      await store.set(app2, { allowHosts: ["a.example.com"], allowPrivate: false });
      expect(await store.policyOf(app2)).toEqual({ allowHosts: ["a.example.com"], allowPrivate: false });
    });

    it("goes with its application", async () => {
      await db.sql.query("DELETE FROM apps WHERE id = $1", [app2]);
      expect((await db.sql.query("SELECT 1 FROM function_egress_policies WHERE app_id = $1", [app2])).rows).toEqual([]);
    });
  });
}
