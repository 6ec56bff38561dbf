// The Web APIs inside a function (docs/functions.md, "Web APIs"), checked
// against Node's own implementations, with the hostile inputs they refuse.
import { createHash, createHmac } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { createSandbox } from "../../../src/infra/sandbox/sandbox.js";
import type { RunInput } from "../../../src/infra/sandbox/types.js";
import type { HostCapability } from "../../../src/kernel/host-capability.js";

// a host capability, so a run can wait on the host and go on in the calls that hand it the answer
const tick: HostCapability = { name: "tick", busyCode: "unavailable", failureCode: "internal_error", methods: { async now() { return 1; } } };
const sandbox = createSandbox({
  capabilities: [tick],
  limits: { maxIsolates: 8, isolatesPerVersion: 2, maxResponseBytes: 4 * 1024 * 1024, maxLogChars: 2000, maxLogLineChars: 500 },
});
afterAll(() => sandbox.close());

let nextVersion = 1;
const input: RunInput = { req: { method: "POST", slug: "s", query: {}, headers: {}, body: null }, consumer: null, event: null, env: {}, trigger: "http", requestId: "r1" };

/** Runs `body` (the inside of an async function returning a JSON value) in a fresh isolate. */
async function inFn(body: string): Promise<unknown> {
  const code = `export default async function (req, ctx) { ${body} }`;
  const r = await sandbox.run({ versionId: nextVersion++, appId: 1, code, memoryMb: 64, timeoutMs: 5000 }, input);
  expect(r.outcome, r.error).toBe("ok");
  return JSON.parse(r.response!.body);
}

const hex = `const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");`;

describe("Web APIs in a function", () => {
  it("has every global, and V8's tampering guards still hold", async () => {
    expect(
      await inFn(`return ["URL","URLSearchParams","TextEncoder","TextDecoder","atob","btoa","structuredClone","crypto","DOMException","CryptoKey","WebAssembly","SharedArrayBuffer"].map((n) => n + ":" + typeof globalThis[n]);`),
    ).toEqual([
      "URL:function", "URLSearchParams:function", "TextEncoder:function", "TextDecoder:function", "atob:function", "btoa:function",
      "structuredClone:function", "crypto:object", "DOMException:function", "CryptoKey:function", "WebAssembly:undefined", "SharedArrayBuffer:undefined",
    ]);
  });

  it("digests like node:crypto", async () => {
    const text = "Zoë 🚀 payload";
    const out = await inFn(`${hex}
      const data = new TextEncoder().encode(${JSON.stringify(text)});
      const r = {};
      for (const a of ["SHA-1", "SHA-256", "SHA-384", "SHA-512"]) r[a] = hex(await crypto.subtle.digest(a, data));
      r.obj = hex(await crypto.subtle.digest({ name: "sha-256" }, data.buffer));
      r.view = hex(await crypto.subtle.digest("SHA-256", new DataView(data.buffer, 2, 3)));
      return r;`);
    const h = (a: string, d: Buffer) => createHash(a).update(d).digest("hex");
    const d = Buffer.from(text);
    expect(out).toEqual({ "SHA-1": h("sha1", d), "SHA-256": h("sha256", d), "SHA-384": h("sha384", d), "SHA-512": h("sha512", d), obj: h("sha256", d), view: h("sha256", d.subarray(2, 5)) });
  });

  it("signs and verifies HMAC like node:crypto (a Stripe-style webhook)", async () => {
    const secret = "whsec_test_123";
    const payload = '{"id":"evt_1","type":"payment_intent.succeeded"}';
    const t = 1700000000;
    const expected = createHmac("sha256", secret).update(`${t}.${payload}`).digest("hex");
    const out = await inFn(`${hex}
      const enc = new TextEncoder();
      const key = await crypto.subtle.importKey("raw", enc.encode(${JSON.stringify(secret)}), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
      const signed = enc.encode("${t}." + ${JSON.stringify(payload)});
      const sig = await crypto.subtle.sign("HMAC", key, signed);
      const theirs = new Uint8Array("${expected}".match(/../g).map((x) => parseInt(x, 16)));
      const bad = theirs.slice(); bad[0] ^= 1;
      return { sig: hex(sig), ok: await crypto.subtle.verify("HMAC", key, theirs, signed), bad: await crypto.subtle.verify({ name: "HMAC" }, key, bad, signed),
        short: await crypto.subtle.verify("HMAC", key, theirs.slice(1), signed), alg: key.algorithm, type: key.type, tag: String(key),
        k512: hex(await crypto.subtle.sign("HMAC", await crypto.subtle.importKey("raw", enc.encode("k"), { name: "HMAC", hash: { name: "SHA-512" } }, true, ["sign"]), enc.encode("m"))) };`);
    expect(out).toEqual({
      sig: expected, ok: true, bad: false, short: false, type: "secret", tag: "[object CryptoKey]",
      alg: { name: "HMAC", hash: { name: "SHA-256" }, length: secret.length * 8 },
      k512: createHmac("sha512", "k").update("m").digest("hex"),
    });
  });

  it("refuses what the subtle API does not do, as rejections the function catches", async () => {
    const out = await inFn(`
      const why = (p) => p.then(() => "resolved", (e) => e.name + ": " + (e instanceof Error));
      const enc = new TextEncoder();
      const verifyOnly = await crypto.subtle.importKey("raw", enc.encode("k"), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
      return [
        await why(crypto.subtle.digest("MD5", enc.encode("x"))),
        await why(crypto.subtle.digest("SHA-256", "a string")),
        await why(crypto.subtle.importKey("jwk", {}, { name: "HMAC", hash: "SHA-256" }, false, ["sign"])),
        await why(crypto.subtle.sign("HMAC", verifyOnly, enc.encode("x"))),
        await why(crypto.subtle.exportKey("raw", verifyOnly)),
      ];`);
    expect(out).toEqual(["NotSupportedError: true", "TypeError: true", "NotSupportedError: true", "InvalidAccessError: true", "InvalidAccessError: true"]);
  });

  it("refuses huge inputs and too much entropy, and the isolate stays usable", async () => {
    const out = await inFn(`
      const why = (p) => p.then(() => "resolved", (e) => e.name);
      const big = new Uint8Array(1024 * 1024 + 1);
      const r = [await why(crypto.subtle.digest("SHA-256", big)),
        await why(crypto.subtle.importKey("raw", big, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]))];
      try { crypto.getRandomValues(new Uint8Array(65537)); r.push("no throw"); } catch (e) { r.push(e.name + ":" + e.code + ":" + (e instanceof DOMException)); }
      try { crypto.getRandomValues(new Float64Array(2)); r.push("no throw"); } catch (e) { r.push(e.name); }
      try { new URL("https://example.com/" + "x".repeat(1024 * 1024)); r.push("no throw"); } catch (e) { r.push(e.name); }
      r.push((await crypto.subtle.digest("SHA-256", new Uint8Array(1024 * 1024))).byteLength);
      return r;`);
    expect(out).toEqual(["RangeError", "RangeError", "QuotaExceededError:22:true", "TypeMismatchError", "RangeError", 32]);
  });

  it("works after the run waited on the host (the isolate then runs off the service's thread)", async () => {
    const out = await inFn(`${hex}
      await ctx.tick.now();
      const h = hex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode("abc")));
      await ctx.tick.now();
      return { h, u: new URL("/x?a=1", "https://e.com").href, c: structuredClone(new Map([[1, 2]])).get(1), id: crypto.randomUUID().length };`);
    expect(out).toEqual({ h: createHash("sha256").update("abc").digest("hex"), u: "https://e.com/x?a=1", c: 2, id: 36 });
  });

  it("caps what one run hands the host's crypto in all, and gives the next run its own allowance", async () => {
    const code = `export default async function () {
      const mib = new Uint8Array(1024 * 1024);
      let n = 0;
      try { for (; n < 100; n++) await crypto.subtle.digest("SHA-256", mib); } catch (e) { return { n, name: e.name, message: e.message }; }
      return { n };
    }`;
    const t = { versionId: nextVersion++, appId: 1, code, memoryMb: 64, timeoutMs: 5000 };
    for (let i = 0; i < 2; i++) {
      const r = await sandbox.run(t, input);
      expect(JSON.parse(r.response!.body)).toEqual({ n: 64, name: "RangeError", message: "this run handed crypto more than 67108864 bytes" });
    }
  });

  it("gives random values and v4 UUIDs", async () => {
    const out = (await inFn(`
      const a = crypto.getRandomValues(new Uint8Array(65536)), b = crypto.getRandomValues(new Uint32Array(4));
      const ids = new Set(); for (let i = 0; i < 100; i++) ids.add(crypto.randomUUID());
      let zeros = 0; for (const x of a) if (x === 0) zeros++;
      return { zeros, b: Array.from(b), ids: [...ids] };`)) as { zeros: number; b: number[]; ids: string[] };
    expect(out.zeros).toBeLessThan(600); // ~256 expected
    expect(new Set(out.b).size).toBe(4);
    expect(out.ids).toHaveLength(100);
    for (const id of out.ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it("encodes and decodes UTF-8 like Node", async () => {
    const text = "aé€😀\u0000z";
    const lone = "x\ud800y";
    const bytes = [0x61, 0xff, 0xe2, 0x82, 0x41, 0xf0, 0x9f, 0x98, 0x80, 0xc0, 0xaf, 0xed, 0xa0, 0x80, 0xef, 0xbb, 0xbf];
    const out = await inFn(`
      const e = new TextEncoder(), d = new TextDecoder();
      const dest = new Uint8Array(5);
      let fatal; try { new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array([0xff])); fatal = "no throw"; } catch (x) { fatal = x.name; }
      let label; try { new TextDecoder("latin1"); label = "no throw"; } catch (x) { label = x.name; }
      return { enc: Array.from(e.encode(${JSON.stringify(text)})), lone: Array.from(e.encode(${JSON.stringify(lone)})),
        dec: d.decode(new Uint8Array(${JSON.stringify(bytes)})), bom: new TextDecoder("utf-8", { ignoreBOM: true }).decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x41])).length,
        round: d.decode(e.encode(${JSON.stringify(text)})), into: e.encodeInto("a😀b", dest), dest: Array.from(dest), fatal, label, enc2: e.encoding };`);
    expect(out).toEqual({
      enc: Array.from(new TextEncoder().encode(text)),
      lone: Array.from(new TextEncoder().encode(lone)),
      dec: new TextDecoder().decode(new Uint8Array(bytes)),
      bom: 2,
      round: text,
      into: new TextEncoder().encodeInto("a😀b", new Uint8Array(5)),
      dest: [0x61, 0xf0, 0x9f, 0x98, 0x80],
      fatal: "TypeError",
      label: "RangeError",
      enc2: "utf-8",
    });
  });

  it("does base64 like Node's atob/btoa", async () => {
    const all = String.fromCharCode(...Array.from({ length: 256 }, (_, i) => i));
    const out = await inFn(`
      const all = String.fromCharCode(...Array.from({ length: 256 }, (_, i) => i));
      const r = { b: [btoa(""), btoa("f"), btoa("fo"), btoa("foo"), btoa(all)], a: [atob("Zm9v"), atob("Zg"), atob("Zg=="), atob(" Zm 9v\\n"), atob(btoa(all)) === all],
        utf8: new TextDecoder().decode(Uint8Array.from(atob(btoa(String.fromCharCode(...new TextEncoder().encode("Zoë 🚀")))), (c) => c.charCodeAt(0))) };
      for (const bad of ["Zm9v=", "Z", "Zm9v!", "Zg==="]) { try { atob(bad); r[bad] = "no throw"; } catch (e) { r[bad] = e.name; } }
      try { btoa("€"); r.euro = "no throw"; } catch (e) { r.euro = e.name; }
      return r;`);
    expect(out).toEqual({
      b: [btoa(""), btoa("f"), btoa("fo"), btoa("foo"), btoa(all)],
      a: ["foo", "f", "f", "foo", true],
      utf8: "Zoë 🚀",
      "Zm9v=": "InvalidCharacterError", Z: "InvalidCharacterError", "Zm9v!": "InvalidCharacterError", "Zg===": "InvalidCharacterError", euro: "InvalidCharacterError",
    });
  });

  it("parses URLs and query strings like Node", async () => {
    const cases: Array<[string, string?]> = [
      ["https://user:pa ss@EXAMPLE.com:8443/a/../b/c?x=1&y=%20z#frag"],
      ["../d?q", "https://example.com/a/b/c"],
      ["http://[::1]:80/"],
      ["https://münchen.de/ä"],
    ];
    const parts = ["href", "origin", "protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash"] as const;
    const out = await inFn(`
      const parts = ${JSON.stringify(parts)};
      const r = ${JSON.stringify(cases)}.map(([i, b]) => { const u = new URL(i, b); return parts.map((p) => u[p]); });
      const u = new URL("https://example.com/p?a=1&b=2&a=3");
      const sp = u.searchParams;
      const got = [sp.get("a"), sp.getAll("a"), sp.has("b"), sp.size];
      sp.append("c d", "é&=+"); sp.delete("b"); sp.set("a", "9");
      got.push(u.href, u.search);
      u.search = "?z=1"; got.push(sp.get("z"), sp.get("a"));
      u.pathname = "/new path"; u.hash = "h"; u.port = "444"; got.push(u.href, String(u), JSON.stringify({ u }));
      let invalid; try { new URL("not a url"); invalid = "no throw"; } catch (e) { invalid = e.name; }
      const q = new URLSearchParams("a=b+c&d=%zz&%F0%9F%98%80=%E2%82%AC&e");
      const o = new URLSearchParams({ x: "1", y: "a b" }); o.sort();
      return { r, got, invalid, can: [URL.canParse("x:"), URL.canParse("nope")], q: [...q], o: o.toString(),
        pairs: new URLSearchParams([["k", "v"], ["k", "w"]]).toString(), special: new URLSearchParams({ s: "!~'()*-._ /?" }).toString() };`);
    const u = new URL("https://example.com/p?a=1&b=2&a=3");
    const sp = u.searchParams;
    const got: unknown[] = [sp.get("a"), sp.getAll("a"), sp.has("b"), sp.size];
    sp.append("c d", "é&=+"); sp.delete("b"); sp.set("a", "9");
    got.push(u.href, u.search);
    u.search = "?z=1"; got.push(sp.get("z"), sp.get("a"));
    u.pathname = "/new path"; u.hash = "h"; u.port = "444"; got.push(u.href, String(u), JSON.stringify({ u }));
    const o = new URLSearchParams({ x: "1", y: "a b" }); o.sort();
    expect(out).toEqual({
      r: cases.map(([i, b]) => { const x = new URL(i, b); return parts.map((p) => x[p]); }),
      got, invalid: "TypeError", can: [true, false],
      q: [...new URLSearchParams("a=b+c&d=%zz&%F0%9F%98%80=%E2%82%AC&e")],
      o: o.toString(),
      pairs: new URLSearchParams([["k", "v"], ["k", "w"]]).toString(),
      special: new URLSearchParams({ s: "!~'()*-._ /?" }).toString(),
    });
  });

  it("clones with the structured clone algorithm", async () => {
    const out = await inFn(`
      const a = { d: new Date(0), m: new Map([[1, { x: 1 }]]), s: new Set(["a"]), r: /x/gi, u: new Uint8Array([1, 2]), big: 10n, n: null, u8: undefined };
      a.self = a;
      const c = structuredClone(a);
      let fn; try { structuredClone({ f() {} }); fn = "no throw"; } catch (e) { fn = e.name + ":" + (e instanceof DOMException); }
      return { cyc: c.self === c, distinct: c !== a && c.m !== a.m, date: c.d instanceof Date && c.d.getTime() === 0, map: c.m.get(1).x, set: c.s.has("a"),
        re: c.r instanceof RegExp && c.r.flags, u: c.u instanceof Uint8Array && Array.from(c.u), big: typeof c.big, undef: "u8" in c, fn };`);
    expect(out).toEqual({ cyc: true, distinct: true, date: true, map: 1, set: true, re: "gi", u: [1, 2], big: "bigint", undef: true, fn: "DataCloneError:true" });
  });
});
