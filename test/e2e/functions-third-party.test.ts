// HTTP triggers a third party can call (docs/functions.md), through the whole
// server over real sockets: a public trigger without a token (ctx.consumer
// null) and its rate limits, a signed trigger (Stripe-style header over the
// raw body: accepted, then refused for a bad signature, a stale timestamp, a
// replay with a modified body, a missing header), secret rotation, an
// operator-given secret under a provider's header name, and req.rawBody.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createModules } from "../../src/server/modules.js";
import { signatureHeader } from "../../src/capabilities/functions/webhook-signature.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { request } from "node:https";

let s: TestServer;
let appKey: string;
let token: string;
let fns: Client<typeof AdminFunctionService>;
let secret: string;
let signedTriggerId: bigint;
let functionId: bigint;

const HOOK = `export default async function (req, ctx) {
  // (not { body, headers }: that would be a shaped response)
  return { consumer: ctx.consumer, parsed: req.body, rawBody: req.rawBody, rawBodyEncoding: req.rawBodyEncoding };
}`;

beforeAll(async () => {
  s = await startTestServer({
    modules: createModules,
    env: { PULSEBASE_FUNCTION_PUBLIC_PER_ADDRESS_PER_MINUTE: "30", PULSEBASE_FUNCTION_PUBLIC_PER_MINUTE: "45" },
  });
  const app = await s.createApp("third party");
  appKey = app.appKey;
  token = (await s.register(app.appKey)).token;
  fns = s.adminClient(AdminFunctionService);
  const fn = await fns.createFunction({ appId: app.appId, name: "hook", code: HOOK });
  functionId = fn.id;
  await fns.createHttpTrigger({ functionId: fn.id, slug: "open", auth: "public" });
  await fns.createHttpTrigger({ functionId: fn.id, slug: "members" });
  const signed = await fns.createHttpTrigger({ functionId: fn.id, slug: "stripe", auth: "signed" });
  secret = signed.signingSecret!;
  signedTriggerId = signed.id;
  // A second public trigger for the per-address limit, so the other tests' calls do not count.
  await fns.createHttpTrigger({ functionId: fn.id, slug: "limited", auth: "public" });
});
afterAll(() => s.close());

/** A POST from another loopback address (another client, as the server sees it). */
function postFrom(localAddress: string, path: string, body: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(`${s.httpsUrl}${path}`, { method: "POST", localAddress, rejectUnauthorized: false, headers: { "content-type": "application/json" } }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) as unknown }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const post = (path: string, body: string | Uint8Array, headers: Record<string, string> = {}) =>
  s.fetch(path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

describe("public triggers", () => {
  it("run without a token at /api/fn/{app_key}/{slug} with ctx.consumer null", async () => {
    const res = await post(`/api/fn/${appKey}/open`, JSON.stringify({ hello: "world" }));
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.consumer).toBeNull();
    expect(body.parsed).toEqual({ hello: "world" });
    expect(body.rawBody).toBe(JSON.stringify({ hello: "world" }));
  });

  it("still run for a consumer with a token at /api/fn/{slug}", async () => {
    const res = await post("/api/fn/open", "{}", { authorization: `Bearer ${token}` });
    expect(res.status).toBe(200);
    expect((await res.json()).consumer).toMatchObject({ id: expect.any(Number) });
  });

  it("do not open consumer-mode triggers, unknown slugs or unknown keys: 404 in the platform envelope", async () => {
    for (const path of [`/api/fn/${appKey}/members`, `/api/fn/${appKey}/nope`, "/api/fn/pk_unknown/open"]) {
      const res = await post(path, "{}");
      expect(res.status, path).toBe(404);
      expect(await res.json()).toMatchObject({ error: "not_found" });
    }
    // hostile keys and slugs are just absent
    for (const path of [`/api/fn/%00/open`, `/api/fn/${appKey}/%00`, `/api/fn/${"k".repeat(5000)}/open`, `/api/fn/${appKey}'--/open`]) {
      expect((await post(path, "{}")).status, path).toBe(404);
    }
    // and /api/fn/{slug} without a token stays 401, public trigger or not
    expect((await post("/api/fn/open", "{}")).status).toBe(401);
  });

  it("are rate-limited per client address (429 with Retry-After)", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++) statuses.push((await post(`/api/fn/${appKey}/limited`, "{}")).status);
    expect(statuses).toEqual(Array(30).fill(200));
    const refused = await post(`/api/fn/${appKey}/limited`, "{}");
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await refused.json()).toMatchObject({ error: "rate_limited" });
    // another trigger's allowance is untouched
    expect((await post(`/api/fn/${appKey}/open`, "{}")).status).toBe(200);
    // from another address the trigger's own (cluster-wide) limit of 45 a minute ends it soon after
    const fromOther: number[] = [];
    let body: unknown;
    for (let i = 0; i < 30 && !fromOther.includes(429); i++) {
      const r = await postFrom("127.0.0.2", `/api/fn/${appKey}/limited`, "{}");
      fromOther.push(r.status);
      body = r.body;
    }
    expect(fromOther.filter((x) => x === 200).length, JSON.stringify([fromOther, body])).toBeGreaterThanOrEqual(10);
    expect(fromOther.at(-1)).toBe(429);
    expect(body).toMatchObject({ error: "rate_limited", message: "This trigger's rate limit was reached." });
  });
});

describe("probing", () => {
  it("an address that keeps calling absent triggers gets 429 before any lookup; others are unaffected", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 64; i++) statuses.push((await postFrom("127.0.0.3", `/api/fn/pk_guess${i}/open`, "{}")).status);
    expect(statuses.filter((x) => x === 404).length).toBe(60);
    expect(statuses.slice(60)).toEqual([429, 429, 429, 429]);
    // a real trigger from the same address is refused too; from another address it works
    expect((await postFrom("127.0.0.3", `/api/fn/${appKey}/open`, "{}")).status).toBe(429);
    expect((await postFrom("127.0.0.4", `/api/fn/${appKey}/open`, "{}")).status).toBe(200);
  });
});

describe("signed triggers", () => {
  const payload = JSON.stringify({ id: "evt_1", type: "invoice.paid", amount: 4200 });

  it("return the generated secret once, never in listings", async () => {
    expect(secret).toMatch(/^whsec_/);
    const { triggers } = await fns.listTriggers({ functionId });
    const t = triggers.find((x) => x.slug === "stripe")!;
    expect(t).toMatchObject({ auth: "signed", signatureHeader: "pulsebase-signature", signatureToleranceSeconds: 300 });
    expect(t.signingSecret).toBeUndefined();
    // other kinds carry no settings of signed triggers or schedules
    const open = triggers.find((x) => x.slug === "open")!;
    expect(open).toMatchObject({ auth: "public" });
    expect([open.signingSecret, open.signatureHeader, open.cron, open.timezone]).toEqual([undefined, undefined, undefined, undefined]);
  });

  it("run when the signature of the raw body verifies; the function sees the raw body", async () => {
    const res = await post(`/api/fn/${appKey}/stripe`, payload, { "pulsebase-signature": signatureHeader(secret, payload) });
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.rawBody).toBe(payload);
    expect(body.parsed).toEqual(JSON.parse(payload));
    expect(body.consumer).toBeNull();
  });

  it("refuse a bad signature, a stale or future timestamp, a modified body and a missing header with 401", async () => {
    const now = Math.floor(Date.now() / 1000);
    const good = signatureHeader(secret, payload, now);
    const cases: Array<[string, string, Record<string, string>]> = [
      ["no header", payload, {}],
      ["wrong secret", payload, { "pulsebase-signature": signatureHeader("whsec_not_the_secret_at_all", payload, now) }],
      ["garbage", payload, { "pulsebase-signature": "v1=zz,t=abc" }],
      // (an hour outside the 300 s tolerance: the requests before these may take seconds on a loaded host)
      ["stale", payload, { "pulsebase-signature": signatureHeader(secret, payload, now - 3600) }],
      ["future", payload, { "pulsebase-signature": signatureHeader(secret, payload, now + 3600) }],
      // A captured request replayed with its body changed (amount raised).
      ["replay, modified body", payload.replace("4200", "999999"), { "pulsebase-signature": good }],
      ["replay, re-dated", payload, { "pulsebase-signature": good.replace(`t=${now}`, `t=${now + 1}`) }],
    ];
    for (const [name, body, headers] of cases) {
      const res = await post(`/api/fn/${appKey}/stripe`, body, headers);
      expect(res.status, name).toBe(401);
      expect(await res.json(), name).toMatchObject({ error: "unauthenticated" });
    }
    // A consumer token does not replace the signature.
    expect((await post("/api/fn/stripe", payload, { authorization: `Bearer ${token}` })).status).toBe(401);
    expect((await post("/api/fn/stripe", payload, { authorization: `Bearer ${token}`, "pulsebase-signature": good })).status).toBe(200);
  });

  it("verify non-UTF-8 bodies byte for byte; rawBody is then base64", async () => {
    const bytes = new Uint8Array([0xff, 0xfe, 0x00, 0x41, 0xc3]);
    const res = await s.fetch(`/api/fn/${appKey}/stripe`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream", "pulsebase-signature": signatureHeader(secret, bytes) },
      body: bytes,
    });
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body).toMatchObject({ rawBodyEncoding: "base64", rawBody: Buffer.from(bytes).toString("base64") });
  });

  it("rotating the secret stops the old one at once", async () => {
    const rotated = await fns.rotateTriggerSecret({ triggerId: signedTriggerId });
    expect(rotated.signingSecret).toMatch(/^whsec_/);
    expect(rotated.signingSecret).not.toBe(secret);
    const old = await post(`/api/fn/${appKey}/stripe`, payload, { "pulsebase-signature": signatureHeader(secret, payload) });
    expect(old.status).toBe(401);
    const fresh = await post(`/api/fn/${appKey}/stripe`, payload, { "pulsebase-signature": signatureHeader(rotated.signingSecret!, payload) });
    expect(fresh.status).toBe(200);
    secret = rotated.signingSecret!;
  });

  it("take a provider's secret and header name (Stripe: stripe-signature)", async () => {
    const fn = { id: functionId };
    const t = await fns.createHttpTrigger({ functionId: fn.id, slug: "from-stripe", auth: "signed", signingSecret: "whsec_given_by_the_provider_123", signatureHeader: "Stripe-Signature", signatureToleranceSeconds: 60 });
    expect(t).toMatchObject({ signatureHeader: "stripe-signature", signatureToleranceSeconds: 60, signingSecret: "whsec_given_by_the_provider_123" });
    const res = await post(`/api/fn/${appKey}/from-stripe`, payload, { "Stripe-Signature": signatureHeader("whsec_given_by_the_provider_123", payload) });
    expect(res.status).toBe(200);
    // within 60 s only
    const stale = await post(`/api/fn/${appKey}/from-stripe`, payload, { "Stripe-Signature": signatureHeader("whsec_given_by_the_provider_123", payload, Math.floor(Date.now() / 1000) - 90) });
    expect(stale.status).toBe(401);
  });

  it("refuses bad trigger settings with 422 naming the field", async () => {
    const fn = { id: functionId };
    const refused = async (req: Record<string, unknown>) => {
      const err = await fns.createHttpTrigger({ functionId: fn.id, slug: "x", ...req } as never).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.InvalidArgument);
      return (err as ConnectError).message;
    };
    expect(await refused({ auth: "anyone" })).toMatch(/consumer, public or signed/);
    expect(await refused({ auth: "signed", signingSecret: "short" })).toMatch(/16 to 256 bytes/);
    expect(await refused({ auth: "signed", signatureToleranceSeconds: 0 })).toMatch(/tolerance/);
    expect(await refused({ auth: "public", signingSecret: "whsec_given_by_the_provider_123" })).toMatch(/signed/);
    const err = await fns.rotateTriggerSecret({ triggerId: (await fns.listTriggers({ functionId: fn.id })).triggers.find((t) => t.slug === "open")!.id }).catch((e: unknown) => e);
    expect((err as ConnectError).code).toBe(Code.FailedPrecondition);
  });
});
