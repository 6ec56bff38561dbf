// The Web APIs through the whole server (docs/functions.md, "Web APIs"):
// functions deployed over the operator API and called over /api/fn/{slug}
// verify a Stripe-style webhook signature with crypto.subtle, hash, parse
// URLs, encode base64 and UTF-8 with the results Node itself gives; huge
// inputs are refused with errors the function catches, and the service
// keeps answering.
import { createHash, createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

// The docs' example: Stripe's `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`.
const WEBHOOK = `const enc = new TextEncoder();
const fromHex = (h) => new Uint8Array((h.match(/../g) ?? []).map((b) => parseInt(b, 16)));
export default async function (req, ctx) {
  const header = req.headers["stripe-signature"] ?? "";
  const parts = Object.fromEntries(header.split(",").map((p) => p.split("=", 2)));
  const t = Number(parts.t);
  if (!parts.v1 || !(Math.abs(Date.now() / 1000 - t) < 300)) return { status: 400, body: { error: "bad signature header" } };
  const key = await crypto.subtle.importKey("raw", enc.encode(ctx.env.STRIPE_WEBHOOK_SECRET), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
  const ok = await crypto.subtle.verify("HMAC", key, fromHex(parts.v1), enc.encode(t + "." + req.rawBody));
  if (!ok) return { status: 401, body: { error: "invalid signature" } };
  return { received: req.body.type };
}`;

const TOOLS = `const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
export default async function (req) {
  const b = req.body;
  try {
    switch (b.op) {
      case "digest": return { hex: hex(await crypto.subtle.digest(b.alg, new TextEncoder().encode(b.text))) };
      case "huge": return { hex: hex(await crypto.subtle.digest("SHA-256", new Uint8Array(b.bytes))) };
      case "random": return { n: crypto.getRandomValues(new Uint8Array(b.bytes)).length };
      case "uuid": return { uuid: crypto.randomUUID() };
      case "url": { const u = new URL(b.url, b.base); return { href: u.href, host: u.host, path: u.pathname, q: Object.fromEntries(u.searchParams), hash: u.hash }; }
      case "base64": return { b64: btoa(String.fromCharCode(...new TextEncoder().encode(b.text))), back: new TextDecoder().decode(Uint8Array.from(atob(b.b64), (c) => c.charCodeAt(0))) };
      case "clone": { const c = structuredClone({ m: new Map([["k", b.text]]) }); return { v: c.m.get("k") }; }
    }
    return { result: "no op" };
  } catch (e) {
    return { error: { name: e.name, message: e.message } };
  }
}`;

const SECRET = "whsec_e2e_" + "x".repeat(24);
let s: TestServer;
let token: string;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules, env: { NATS_URL: "" } });
  const app = await s.createApp("web apis");
  token = (await s.register(app.appKey)).token;
  const fns = s.adminClient(AdminFunctionService);
  for (const [name, code] of [["webhook", WEBHOOK], ["tools", TOOLS]] as const) {
    const fn = await fns.createFunction({ appId: app.appId, name });
    if (name === "webhook") await fns.setSecret({ functionId: fn.id, name: "STRIPE_WEBHOOK_SECRET", value: SECRET } as never);
    await fns.deployVersion({ functionId: fn.id, code, activate: true });
    await fns.createHttpTrigger({ functionId: fn.id, slug: name });
  }
}, 60_000);
afterAll(() => s?.close());

async function post(slug: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; json: unknown }> {
  const res = await s.fetch(`/api/fn/${slug}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers },
    body,
  });
  return { status: res.status, json: JSON.parse(await res.text()) };
}
const tools = async (b: Record<string, unknown>) => {
  const r = await post("tools", JSON.stringify(b));
  expect(r.status, JSON.stringify(r.json)).toBe(200);
  return r.json as Record<string, unknown>;
};

describe("Web APIs in deployed functions", () => {
  it("verifies a Stripe-style webhook signature with crypto.subtle", async () => {
    // odd spacing: the signature covers the bytes as sent
    const body = '{"id":"evt_1",  "type":"payment_intent.succeeded","data":{"amount":4200,"note":"Zoë 🚀"}}';
    const t = Math.floor(Date.now() / 1000);
    const sign = (secret: string, at: number, raw: string) => `t=${at},v1=${createHmac("sha256", secret).update(`${at}.${raw}`).digest("hex")}`;
    expect(await post("webhook", body, { "stripe-signature": sign(SECRET, t, body) })).toEqual({ status: 200, json: { received: "payment_intent.succeeded" } });
    expect(await post("webhook", body, { "stripe-signature": sign("whsec_wrong", t, body) })).toEqual({ status: 401, json: { error: "invalid signature" } });
    expect(await post("webhook", body.replace("4200", "4201"), { "stripe-signature": sign(SECRET, t, body) })).toEqual({ status: 401, json: { error: "invalid signature" } });
    expect(await post("webhook", body, { "stripe-signature": sign(SECRET, t - 3600, body) })).toEqual({ status: 400, json: { error: "bad signature header" } });
  });

  it("hashes, parses, encodes and clones like Node", async () => {
    const text = "Grüße, 世界 🚀";
    for (const [alg, node] of <Array<[string, string]>>[["SHA-1", "sha1"], ["SHA-256", "sha256"], ["SHA-384", "sha384"], ["SHA-512", "sha512"]]) {
      expect(await tools({ op: "digest", alg, text })).toEqual({ hex: createHash(node).update(text).digest("hex") });
    }
    const u = new URL("../hooks/in?x=1&y=a+b&z=%C3%A9#top", "https://Api.Example.com:443/v1/items/");
    expect(await tools({ op: "url", url: "../hooks/in?x=1&y=a+b&z=%C3%A9#top", base: "https://Api.Example.com:443/v1/items/" })).toEqual({
      href: u.href, host: u.host, path: u.pathname, q: Object.fromEntries(u.searchParams), hash: u.hash,
    });
    expect(await tools({ op: "url", url: "no scheme" })).toEqual({ error: { name: "TypeError", message: "Invalid URL" } });
    expect(await tools({ op: "base64", text, b64: Buffer.from(text).toString("base64") })).toEqual({ b64: Buffer.from(text).toString("base64"), back: text });
    expect(await tools({ op: "clone", text })).toEqual({ v: text });
    const { uuid } = await tools({ op: "uuid" });
    expect(uuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(await tools({ op: "random", bytes: 65536 })).toEqual({ n: 65536 });
  });

  it("refuses a huge digest input and too much entropy with errors the function catches; the service keeps answering", async () => {
    expect(await tools({ op: "huge", bytes: 64 * 1024 * 1024 })).toEqual({ error: { name: "RangeError", message: "data is larger than 1048576 bytes" } });
    expect(await tools({ op: "random", bytes: 65537 })).toMatchObject({ error: { name: "QuotaExceededError" } });
    expect(await tools({ op: "huge", bytes: 1024 * 1024 })).toEqual({ hex: createHash("sha256").update(Buffer.alloc(1024 * 1024)).digest("hex") });
  });
});
