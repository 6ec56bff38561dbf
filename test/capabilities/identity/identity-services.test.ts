// Identity services in memory (createRouterTransport), on real PostgreSQL and
// on PGlite: the same SQL must behave the same on both.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, createRouterTransport, Code, type Client } from "@connectrpc/connect";
import { ConsumerService } from "../../../gen/pulsebase/platform/v1/consumer_pb.js";
import { SessionService } from "../../../gen/pulsebase/platform/v1/session_pb.js";
import { IdentityService } from "../../../gen/pulsebase/admin/v1/identity_pb.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { IdentityStore } from "../../../src/capabilities/identity/identity-store.js";
import { TokenService } from "../../../src/capabilities/identity/tokens.js";
import { Authenticator } from "../../../src/capabilities/identity/authenticator.js";
import { createConsumerServiceImpl } from "../../../src/capabilities/identity/consumer-service.js";
import { createSessionServiceImpl } from "../../../src/capabilities/identity/session-service.js";
import { createAdminIdentityServiceImpl } from "../../../src/capabilities/identity/admin-identity-service.js";
import { consumerAuthInterceptor } from "../../../src/transport/connect-node/interceptors.js";
import { newKey } from "../../../src/capabilities/identity/token-keys.js";
import { TokenIssueLimiter } from "../../../src/capabilities/identity/token-issue-limiter.js";
import { withinOneWindow } from "../../helpers/until.js";

for (const kind of ["postgres", "pglite"] as const) {
  describe(`identity services on ${kind}`, () => {
    let db: TestDb;
    let consumers: Client<typeof ConsumerService>;
    let sessions: Client<typeof SessionService>;
    let admin: Client<typeof IdentityService>;
    let appKey: string;

    beforeAll(async () => {
      db = await createTestDb(kind);
      const store = new IdentityStore(db.sql);
      const k = newKey();
      const tokens = new TokenService([{ kid: k.kid, secret: new Uint8Array(Buffer.from(k.secret, "base64url")), createdAt: k.created_at }], 3600);
      const auth = new Authenticator(store, tokens);
      const transport = createRouterTransport(
        (router) => {
          router.service(ConsumerService, createConsumerServiceImpl({ store, tokens, auth, limiter: new TokenIssueLimiter(db.sql, { perAddressPerMinute: 1000, perConsumerPerMinute: 3 }) }));
          router.service(SessionService, createSessionServiceImpl({ store }));
        },
        { router: { interceptors: [consumerAuthInterceptor((h) => auth.fromAuthorization(h))] } },
      );
      const adminTransport = createRouterTransport((router) => {
        router.service(IdentityService, createAdminIdentityServiceImpl({ store, auth }));
      });
      consumers = createClient(ConsumerService, transport);
      sessions = createClient(SessionService, transport);
      admin = createClient(IdentityService, adminTransport);
      const team = await admin.createTeam({ name: "t" });
      appKey = (await admin.createApp({ teamId: team.id, name: "a" })).appKey;
    });
    afterAll(() => db.drop());

    const reg = (over: Record<string, string> = {}) =>
      consumers.createConsumer({ appKey, deviceId: "d", deviceModel: "m", userId: "u", os: "ios", country: "SE", language: "sv", ...over });

    it("registers concurrently without duplicating the consumer", async () => {
      const all = await Promise.all(Array.from({ length: 20 }, () => reg({ deviceId: "race" })));
      expect(new Set(all.map((c) => c.id)).size).toBe(1);
      expect(new Set(all.map((c) => c.token)).size).toBe(20);
    });

    it("scopes sessions to the caller and validates batches", async () => {
      const c = await reg({ deviceId: "s1" });
      const h = { headers: { authorization: `Bearer ${c.token}` } };
      const started = await sessions.startSession({}, h);
      const ended = await sessions.endSession({ sessionId: started.sessionId, timestamp: new Date(Date.now() + 1000).toISOString() }, h);
      expect(ended.endedAt).toBeDefined();
      await expect(sessions.endSession({ sessionId: started.sessionId }, h)).rejects.toMatchObject({ code: Code.FailedPrecondition });
      await expect(sessions.endSession({ sessionId: 999999n }, h)).rejects.toMatchObject({ code: Code.NotFound });
      // beyond the safe integers (sent as a numeric string): still no such session, not a 500
      await expect(sessions.endSession({ sessionId: 9223372036854775807n }, h)).rejects.toMatchObject({ code: Code.NotFound });
      const tooMany = Array.from({ length: 101 }, () => ({ startedAt: "2026-01-01T00:00:00Z", endedAt: "2026-01-01T00:01:00Z" }));
      await expect(sessions.batchSessions({ sessions: tooMany }, h)).rejects.toMatchObject({ code: Code.InvalidArgument });
      // year 0 cannot be stored by PostgreSQL: 422 naming the field, not a 500
      const year0 = await sessions.batchSessions({ sessions: [{ startedAt: "0000-06-01T00:00:00Z", endedAt: "2026-01-01T00:00:00Z" }] }, h).catch((e) => e);
      expect(year0).toMatchObject({ code: Code.InvalidArgument });
      expect(year0.rawMessage).toMatch(/started_at/);
      const ok = await sessions.batchSessions({ sessions: tooMany.slice(0, 100) }, h);
      expect(ok.sessions).toHaveLength(100);
      const ids = ok.sessions.map((x) => x.sessionId);
      expect([...ids].sort((a, b) => (a < b ? -1 : 1))).toEqual(ids);
    });

    it("refuses NUL characters in consumer fields and app keys with 422, not a 500", async () => {
      const { errorDetail } = await import("../../../src/kernel/errors.js");
      const fieldsOf = (e: unknown) => errorDetail(e)?.fieldViolations.map((f) => f.field).sort();
      const bad = await reg({ deviceId: "d\u0000", userEmail: "a\u0000@b.co" }).catch((e) => e);
      expect(errorDetail(bad)?.httpStatus).toBe(422);
      expect(fieldsOf(bad)).toEqual(["device_id", "user_email"]);
      expect(fieldsOf(await reg({ appKey: `${appKey}\u0000` }).catch((e) => e))).toEqual(["app_key"]);
      expect(fieldsOf(await consumers.issueToken({ appKey: `${appKey}\u0000`, consumerId: "1" }).catch((e) => e))).toEqual(["app_key"]);
      const c = await reg({ deviceId: "nul" });
      const upd = await consumers.updateConsumer({ id: c.id, userId: "u\u0000" }, { headers: { authorization: `Bearer ${c.token}` } }).catch((e) => e);
      expect(fieldsOf(upd)).toEqual(["user_id"]);
    });

    it("refuses an app for a team that does not exist and validates operator input", async () => {
      await expect(admin.createApp({ teamId: 424242n, name: "x" })).rejects.toMatchObject({ code: Code.NotFound });
      await expect(admin.createUser({ name: "", email: "bad" })).rejects.toMatchObject({ code: Code.InvalidArgument });
      const u = await admin.createUser({ name: "Ann", email: `ann-${kind}@example.com` });
      await expect(admin.createUser({ name: "Ann", email: `ann-${kind}@example.com` })).rejects.toMatchObject({ code: Code.AlreadyExists });
      expect(u.id).toBeGreaterThan(0n);
    });

    it("rate-limits token issue per consumer with a retry-after", async () => {
      const c = await reg({ deviceId: "limited" });
      await withinOneWindow(60_000);
      for (let i = 0; i < 3; i++) await consumers.issueToken({ appKey, consumerId: String(c.id) });
      const err = await consumers.issueToken({ appKey, consumerId: String(c.id) }).catch((e) => e);
      expect(err.code).toBe(Code.ResourceExhausted);
      const { ErrorDetailSchema } = await import("../../../gen/pulsebase/common/v1/error_pb.js");
      expect(err.findDetails(ErrorDetailSchema)[0].retryAfterSeconds).toBeGreaterThan(0);
    });

    it("stores and returns plans", async () => {
      const team = await admin.createTeam({ name: "plans" });
      const app = await admin.createApp({ teamId: team.id, name: "p" });
      const updated = await admin.setAppPlan({ appId: app.id, plan: { name: "pro", functionsEnabled: false, functionInvocationsPerMinute: 10, cmsRequestsPerDay: 5n } });
      expect(updated.plan).toMatchObject({ name: "pro", functionsEnabled: false, functionInvocationsPerMinute: 10, cmsRequestsPerDay: 5n });
      const again = await admin.getApp({ key: { case: "appKey", value: app.appKey } });
      expect(again.plan?.name).toBe("pro");
    });
  });
}
