// GET /api/consumer/token under a hostile caller: wrong
// keys cannot lock a consumer's token refresh, `0123` is consumer 123's
// bucket, failed attempts are charged to the caller's address, and in lenient
// mode one address cannot mint tokens for (and so read) consumer after
// consumer. The service runs in memory on real PostgreSQL; the client address
// is set per call, as the transports set it from the connection.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { ConsumerService } from "../../../gen/pulsebase/platform/v1/consumer_pb.js";
import { IdentityService } from "../../../gen/pulsebase/admin/v1/identity_pb.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { IdentityStore } from "../../../src/capabilities/identity/identity-store.js";
import { TokenService } from "../../../src/capabilities/identity/tokens.js";
import { Authenticator } from "../../../src/capabilities/identity/authenticator.js";
import { createConsumerServiceImpl } from "../../../src/capabilities/identity/consumer-service.js";
import { createAdminIdentityServiceImpl } from "../../../src/capabilities/identity/admin-identity-service.js";
import { newKey } from "../../../src/capabilities/identity/token-keys.js";
import { DEFAULT_TOKEN_ISSUE_LIMITS, TokenIssueLimiter } from "../../../src/capabilities/identity/token-issue-limiter.js";
import { kClientAddress } from "../../../src/kernel/principal.js";
import { errorDetail } from "../../../src/kernel/errors.js";
import { withinOneWindow } from "../../helpers/until.js";

let db: TestDb;
let consumers: Client<typeof ConsumerService>;
/** A second server process on the same database: its own limiter. */
let consumers2: Client<typeof ConsumerService>;
let admin: Client<typeof IdentityService>;

beforeAll(async () => {
  db = await createTestDb("postgres");
  const store = new IdentityStore(db.sql);
  const k = newKey();
  const tokens = new TokenService([{ kid: k.kid, secret: new Uint8Array(Buffer.from(k.secret, "base64url")), createdAt: k.created_at }], 3600);
  const auth = new Authenticator(store, tokens);
  // The limits the server runs with.
  const server = (limiter: TokenIssueLimiter) => createClient(ConsumerService, createRouterTransport(
    (router) => router.service(ConsumerService, createConsumerServiceImpl({ store, tokens, auth, limiter })),
    {
      router: {
        interceptors: [(next) => (req) => {
          req.contextValues.set(kClientAddress, req.header.get("x-test-address") ?? "");
          return next(req);
        }],
      },
    },
  ));
  consumers = server(new TokenIssueLimiter(db.sql));
  consumers2 = server(new TokenIssueLimiter(db.sql));
  admin = createClient(IdentityService, createRouterTransport((router) => router.service(IdentityService, createAdminIdentityServiceImpl({ store, auth }))));
});
afterAll(() => db.drop());

async function newApp(strict = false): Promise<{ appKey: string; id: bigint }> {
  const team = await admin.createTeam({ name: "t" });
  const app = await admin.createApp({ teamId: team.id, name: "a" });
  if (strict) await admin.updateAppSettings({ appId: app.id, strictTokenMode: true });
  return { appKey: app.appKey, id: app.id };
}

const register = (appKey: string, deviceId: string) =>
  consumers.createConsumer({ appKey, deviceId, deviceModel: "m", userId: "u", os: "ios", country: "SE", language: "sv" });

const issue = (address: string, appKey: string, consumerId: string, deviceId = "", via = consumers) =>
  via.issueToken({ appKey, consumerId, deviceId }, { headers: { "x-test-address": address } });

const statusOf = (p: Promise<unknown>) => p.then(() => 200, (e: unknown) => errorDetail(e)?.httpStatus ?? -1);

describe("the per-consumer limit", () => {
  it("is not charged by requests with a wrong key: 21 of them leave the consumer's refresh working", async () => {
    const { appKey } = await newApp();
    const c = await register(appKey, "victim");
    for (let i = 0; i < DEFAULT_TOKEN_ISSUE_LIMITS.perConsumerPerMinute + 1; i++) {
      expect(await statusOf(issue("10.0.0.66", "pk_wrong_key", String(c.id)))).toBe(404);
    }
    expect(await statusOf(issue("10.0.0.1", appKey, String(c.id)))).toBe(200);
  });

  it("keys 0123 and 123 on the same consumer", async () => {
    const { appKey } = await newApp();
    const c = await register(appKey, "padded");
    await withinOneWindow(60_000);
    const n = DEFAULT_TOKEN_ISSUE_LIMITS.perConsumerPerMinute;
    for (let i = 0; i < n; i++) expect(await statusOf(issue(`10.1.0.${i}`, appKey, String(c.id)))).toBe(200);
    const padded = await issue("10.1.1.1", appKey, `00${c.id}`).catch((e: unknown) => e);
    expect(errorDetail(padded)?.httpStatus).toBe(429);
    expect(errorDetail(padded)?.retryAfterSeconds).toBeGreaterThan(0);
  });
});

describe("the per-address limit", () => {
  it("counts failed attempts against the caller's address, not against anyone else", async () => {
    const { appKey } = await newApp();
    const c = await register(appKey, "bystander");
    const n = DEFAULT_TOKEN_ISSUE_LIMITS.perAddressPerMinute;
    for (let i = 0; i < n; i++) await statusOf(issue("10.2.0.1", "pk_guess_" + i, String(c.id)));
    const blocked = await issue("10.2.0.1", appKey, String(c.id)).catch((e: unknown) => e);
    expect(errorDetail(blocked)?.httpStatus).toBe(429);
    expect((blocked as { code: Code }).code).toBe(Code.ResourceExhausted);
    expect(await statusOf(issue("10.2.0.2", appKey, String(c.id)))).toBe(200);
  });
});

describe("lenient mode", () => {
  it("lets one address mint tokens for at most 20 different consumers an hour; the same ones again, and other addresses, still work", async () => {
    const { appKey } = await newApp();
    const ids: bigint[] = [];
    for (let i = 0; i < 22; i++) ids.push((await register(appKey, `walk-${i}`)).id);
    await withinOneWindow(3_600_000);
    const max = DEFAULT_TOKEN_ISSUE_LIMITS.consumersPerAddressPerHour;
    for (const id of ids.slice(0, max)) expect(await statusOf(issue("10.3.0.1", appKey, String(id)))).toBe(200);
    const next = await issue("10.3.0.1", appKey, String(ids[max])).catch((e: unknown) => e);
    expect(errorDetail(next)?.httpStatus).toBe(429);
    expect((next as Error).message).toMatch(/different consumers/);
    // A consumer this address already minted for: still served.
    expect(await statusOf(issue("10.3.0.1", appKey, String(ids[0])))).toBe(200);
    // Another address, or the same address on another application, is not affected.
    expect(await statusOf(issue("10.3.0.2", appKey, String(ids[max])))).toBe(200);
    const other = await newApp();
    const o = await register(other.appKey, "elsewhere");
    expect(await statusOf(issue("10.3.0.1", other.appKey, String(o.id)))).toBe(200);
  });

  it("does not apply in strict mode, where the device_id is required", async () => {
    const { appKey } = await newApp(true);
    const max = DEFAULT_TOKEN_ISSUE_LIMITS.consumersPerAddressPerHour;
    for (let i = 0; i < max + 2; i++) {
      const c = await register(appKey, `strict-${i}`);
      expect(await statusOf(issue("10.4.0.1", appKey, String(c.id), `strict-${i}`))).toBe(200);
    }
    // Without the device_id the consumer cannot be named at all.
    const c = await register(appKey, "strict-x");
    expect(await statusOf(issue("10.4.0.2", appKey, String(c.id), "wrong"))).toBe(404);
  });
});

describe("across servers", () => {
  it("two servers on one database together mint exactly 20 tokens a minute for one consumer", async () => {
    const { appKey } = await newApp();
    const c = await register(appKey, "shared");
    await withinOneWindow(60_000);
    const n = DEFAULT_TOKEN_ISSUE_LIMITS.perConsumerPerMinute;
    const statuses = await Promise.all(
      Array.from({ length: n + 10 }, (_, i) => statusOf(issue(`10.5.0.${i}`, appKey, `${i % 3 === 0 ? "0" : ""}${c.id}`, "", i % 2 ? consumers2 : consumers))),
    );
    expect(statuses.filter((s) => s === 200)).toHaveLength(n);
    expect(statuses.filter((s) => s === 429)).toHaveLength(10);
    const refused = await issue("10.5.1.1", appKey, String(c.id), "", consumers2).catch((e: unknown) => e);
    expect(errorDetail(refused)?.retryAfterSeconds).toBeGreaterThan(0);
    expect(errorDetail(refused)?.retryAfterSeconds).toBeLessThanOrEqual(60);
  });

  it("in lenient mode, one address gets 20 different consumers an hour across both servers; those it was served stay served on either", async () => {
    const { appKey } = await newApp();
    const ids: bigint[] = [];
    for (let i = 0; i < 22; i++) ids.push((await register(appKey, `walk2-${i}`)).id);
    await withinOneWindow(3_600_000);
    const max = DEFAULT_TOKEN_ISSUE_LIMITS.consumersPerAddressPerHour;
    const statuses = await Promise.all(ids.map((id, i) => statusOf(issue("10.6.0.1", appKey, String(id), "", i % 2 ? consumers2 : consumers))));
    expect(statuses.filter((s) => s === 200)).toHaveLength(max);
    const served = ids.filter((_, i) => statuses[i] === 200);
    const refused = ids.filter((_, i) => statuses[i] !== 200);
    expect(await statusOf(issue("10.6.0.1", appKey, String(served[0]), "", consumers2))).toBe(200);
    expect(await statusOf(issue("10.6.0.1", appKey, String(served[1]), "", consumers))).toBe(200);
    expect(await statusOf(issue("10.6.0.1", appKey, String(refused[0]), "", consumers))).toBe(429);
  });
});
