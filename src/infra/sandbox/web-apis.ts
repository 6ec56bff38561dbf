// The Web APIs of a function (docs/functions.md, "Web APIs"): URL,
// URLSearchParams, TextEncoder/TextDecoder (UTF-8), atob/btoa,
// structuredClone, crypto.getRandomValues/randomUUID and crypto.subtle
// (digest, HMAC importKey/sign/verify). V8 alone has none of them.
//
// Small, exact code runs in the isolate (base64, UTF-8, form encoding);
// what needs the host's own implementation (URL parsing, randomness,
// hashing, V8's structured clone) is one synchronous call to `webHost`
// through a Reference held in the installer's closure, unreachable from
// user code. A synchronous call leaves nothing pending, so a run's end
// guarantees (docs/functions-internals.md, "Host capabilities") hold unchanged; its
// time counts in the run's own time limit, and every byte input is capped
// at MAX_WEB_INPUT_BYTES before it leaves the isolate.
import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";

/** Largest input, in bytes, of one host-backed call (a digest, a signature, random bytes). */
export const MAX_WEB_INPUT_BYTES = 1024 * 1024;
/** Crypto input (data, keys, signatures, random bytes) one run may hand the host in all: about 0.1 s of the host's CPU. */
export const MAX_WEB_BYTES_PER_RUN = 64 * 1024 * 1024;

/** What a run may still hand the host's crypto, in bytes; reset by the isolate at each run's start. */
export interface WebBudget {
  bytes: number;
}

const HASHES: Record<string, string> = { "SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512" };
const URL_PARTS = ["href", "origin", "protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash"] as const;

function charge(budget: WebBudget, n: number): void {
  budget.bytes -= n;
  if (budget.bytes < 0) throw new RangeError(`this run handed crypto more than ${MAX_WEB_BYTES_PER_RUN} bytes`);
}
function bytes(budget: WebBudget, v: unknown): Uint8Array {
  if (!(v instanceof Uint8Array) || v.byteLength > MAX_WEB_INPUT_BYTES) throw new RangeError("input too large");
  charge(budget, v.byteLength);
  return v;
}
function hashName(v: unknown): string {
  const h = typeof v === "string" ? HASHES[v] : undefined;
  if (!h) throw new TypeError("unsupported hash");
  return h;
}
function arrayBuffer(b: Buffer): ArrayBuffer {
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
}
function urlParts(u: URL): string[] {
  return URL_PARTS.map((k) => u[k]);
}

/**
 * The host side, called synchronously from the isolate with copies of plain
 * values (untrusted: checked here too). Its result is copied back.
 */
export function webHost(budget: WebBudget, op: unknown, a?: unknown, b?: unknown, c?: unknown, d?: unknown): unknown {
  switch (op) {
    case "url": {
      // [input, base] -> the parts, or null when it does not parse
      if (typeof a !== "string" || (b !== undefined && typeof b !== "string")) throw new TypeError("invalid URL input");
      const u = URL.parse(a, b);
      return u ? urlParts(u) : null;
    }
    case "urlSet": {
      // [href, part, value] -> the parts after `url[part] = value`
      const u = typeof a === "string" ? URL.parse(a) : null;
      if (!u || typeof b !== "string" || typeof c !== "string" || !(URL_PARTS as readonly string[]).includes(b) || b === "origin") throw new TypeError("invalid URL update");
      (u as unknown as Record<string, string>)[b] = c;
      return urlParts(u);
    }
    case "random": {
      if (typeof a !== "number" || !(a >= 0 && a <= 65536)) throw new RangeError("invalid length");
      charge(budget, a);
      return arrayBuffer(randomBytes(a));
    }
    case "uuid":
      return randomUUID();
    case "digest":
      return arrayBuffer(createHash(hashName(a)).update(bytes(budget, b)).digest());
    case "hmac": {
      // [hash, key, data] -> signature
      return arrayBuffer(createHmac(hashName(a), bytes(budget, b)).update(bytes(budget, c)).digest());
    }
    case "verify": {
      // [hash, key, data, signature] -> whether the signature matches (compared in constant time)
      const mac = createHmac(hashName(a), bytes(budget, b)).update(bytes(budget, c)).digest();
      const sig = bytes(budget, d);
      return sig.byteLength === mac.byteLength && timingSafeEqual(sig, mac);
    }
    case "clone":
      // the copy in and the copy out are V8's structured clone
      return a;
  }
  throw new TypeError("unknown operation");
}

// Evaluates to an installer taking the Reference to webHost and the input
// cap; it defines the globals.
export const WEB_APIS_SOURCE = String.raw`(function (webRef, maxBytes) {
  "use strict";
  const copy = { arguments: { copy: true }, result: { copy: true } };
  function host() {
    const args = [];
    for (let i = 0; i < arguments.length; i++) args[i] = arguments[i];
    return webRef.applySync(undefined, args, copy);
  }
  const U8 = Uint8Array, AB = ArrayBuffer, fromCharCode = String.fromCharCode, PromiseCtor = Promise;
  const define = (name, value) => Object.defineProperty(globalThis, name, { value: value, writable: true, configurable: true, enumerable: false });

  // DOMException (the errors browsers throw here)
  const CODES = { IndexSizeError: 1, NotFoundError: 8, NotSupportedError: 9, InvalidStateError: 11, SyntaxError: 12,
    InvalidAccessError: 15, TypeMismatchError: 17, QuotaExceededError: 22, DataCloneError: 25, InvalidCharacterError: 5 };
  class DOMException extends Error {
    constructor(message, name) {
      super(message === undefined ? "" : String(message));
      Object.defineProperty(this, "name", { value: name === undefined ? "Error" : String(name), configurable: true, writable: true });
    }
    get code() { return CODES[this.name] || 0; }
  }
  define("DOMException", DOMException);

  // BufferSource -> a Uint8Array of its own bytes (refused past maxBytes)
  function toBytes(v, what) {
    let u;
    if (v instanceof AB) u = new U8(v);
    else if (AB.isView(v)) u = new U8(v.buffer, v.byteOffset, v.byteLength);
    else throw new TypeError(what + " must be an ArrayBuffer, a TypedArray or a DataView");
    if (u.byteLength > maxBytes) throw new RangeError(what + " is larger than " + maxBytes + " bytes");
    return u.slice();
  }

  // ---- UTF-8 ----
  function utf8Encode(s) {
    s = String(s);
    const out = new U8(s.length * 3);
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      let c = s.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdfff) {
        const d = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); i++; }
        else c = 0xfffd;
      }
      if (c < 0x80) out[n++] = c;
      else if (c < 0x800) { out[n++] = 0xc0 | (c >> 6); out[n++] = 0x80 | (c & 63); }
      else if (c < 0x10000) { out[n++] = 0xe0 | (c >> 12); out[n++] = 0x80 | ((c >> 6) & 63); out[n++] = 0x80 | (c & 63); }
      else { out[n++] = 0xf0 | (c >> 18); out[n++] = 0x80 | ((c >> 12) & 63); out[n++] = 0x80 | ((c >> 6) & 63); out[n++] = 0x80 | (c & 63); }
    }
    return out.slice(0, n);
  }
  // The WHATWG UTF-8 decoder: each invalid sequence is one U+FFFD (or an error when fatal).
  function utf8Decode(b, fatal) {
    let s = "", chunk = [];
    let i = 0;
    const bad = () => { if (fatal) throw new TypeError("The encoded data was not valid for encoding utf-8"); return 0xfffd; };
    while (i < b.length) {
      const x = b[i];
      let cp, need = 0, lo = 0x80, hi = 0xbf;
      if (x < 0x80) { cp = x; i++; }
      else {
        if (x >= 0xc2 && x <= 0xdf) { need = 1; cp = x & 0x1f; }
        else if (x >= 0xe0 && x <= 0xef) { need = 2; cp = x & 0xf; if (x === 0xe0) lo = 0xa0; if (x === 0xed) hi = 0x9f; }
        else if (x >= 0xf0 && x <= 0xf4) { need = 3; cp = x & 0x7; if (x === 0xf0) lo = 0x90; if (x === 0xf4) hi = 0x8f; }
        else { cp = bad(); i++; need = -1; }
        if (need > 0) {
          i++;
          let k = 0;
          for (; k < need; k++) {
            const y = b[i];
            if (i >= b.length || y < lo || y > hi) break;
            lo = 0x80; hi = 0xbf;
            cp = (cp << 6) | (y & 0x3f); i++;
          }
          if (k < need) cp = bad();
        }
      }
      if (cp > 0xffff) { cp -= 0x10000; chunk.push(0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff)); }
      else chunk.push(cp);
      if (chunk.length >= 8192) { s += fromCharCode.apply(null, chunk); chunk = []; }
    }
    return s + fromCharCode.apply(null, chunk);
  }
  const UTF8_LABELS = ["utf-8", "utf8", "unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "x-unicode20utf8"];
  class TextEncoder {
    get encoding() { return "utf-8"; }
    encode(input) { return utf8Encode(input === undefined ? "" : input); }
    encodeInto(input, dest) {
      const b = utf8Encode(input);
      // whole code points only
      let n = Math.min(b.length, dest.length);
      if (n < b.length) while (n > 0 && (b[n] & 0xc0) === 0x80) n--;
      dest.set(b.subarray(0, n));
      return { read: utf8Decode(b.subarray(0, n), false).length, written: n };
    }
  }
  class TextDecoder {
    #fatal; #ignoreBOM;
    constructor(label, options) {
      const l = label === undefined ? "utf-8" : String(label).trim().toLowerCase();
      if (UTF8_LABELS.indexOf(l) < 0) throw new RangeError("The \"" + label + "\" encoding is not supported (only utf-8)");
      this.#fatal = !!(options && options.fatal);
      this.#ignoreBOM = !!(options && options.ignoreBOM);
    }
    get encoding() { return "utf-8"; }
    get fatal() { return this.#fatal; }
    get ignoreBOM() { return this.#ignoreBOM; }
    decode(input, options) {
      if (options && options.stream) throw new TypeError("TextDecoder: the stream option is not supported in functions");
      if (input === undefined) return "";
      let b;
      if (input instanceof AB) b = new U8(input);
      else if (AB.isView(input)) b = new U8(input.buffer, input.byteOffset, input.byteLength);
      else throw new TypeError("TextDecoder.decode: input must be an ArrayBuffer, a TypedArray or a DataView");
      if (!this.#ignoreBOM && b.length >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf) b = b.subarray(3);
      return utf8Decode(b, this.#fatal);
    }
  }
  define("TextEncoder", TextEncoder);
  define("TextDecoder", TextDecoder);

  // ---- base64 (the forgiving-base64 of the HTML standard) ----
  const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const B64_INDEX = Object.create(null);
  for (let i = 0; i < 64; i++) B64_INDEX[B64[i]] = i;
  function btoa(data) {
    if (arguments.length < 1) throw new TypeError("btoa requires 1 argument");
    const s = String(data);
    let out = "";
    for (let i = 0; i < s.length; i += 3) {
      const a = s.charCodeAt(i), b = s.charCodeAt(i + 1), c = s.charCodeAt(i + 2);
      if (a > 255 || b > 255 || c > 255) throw new DOMException("Invalid character", "InvalidCharacterError");
      const n = (a << 16) | ((b || 0) << 8) | (c || 0);
      out += B64[n >> 18] + B64[(n >> 12) & 63] + (i + 1 < s.length ? B64[(n >> 6) & 63] : "=") + (i + 2 < s.length ? B64[n & 63] : "=");
    }
    return out;
  }
  function atob(data) {
    if (arguments.length < 1) throw new TypeError("atob requires 1 argument");
    let s = String(data).replace(/[\t\n\f\r ]+/g, "");
    if (s.length % 4 === 0) s = s.replace(/==?$/, "");
    if (s.length % 4 === 1 || /[^A-Za-z0-9+/]/.test(s)) throw new DOMException("The string to be decoded is not correctly encoded.", "InvalidCharacterError");
    let out = "", bits = 0, acc = 0;
    for (let i = 0; i < s.length; i++) {
      acc = (acc << 6) | B64_INDEX[s[i]]; bits += 6;
      if (bits >= 8) { bits -= 8; out += fromCharCode((acc >> bits) & 255); }
    }
    return out;
  }
  define("btoa", btoa);
  define("atob", atob);

  // ---- URLSearchParams (application/x-www-form-urlencoded) ----
  let partOf, setPart, setQuery; // URL's private accessors, set in its class body
  function formEncode(s) {
    const b = utf8Encode(s);
    let out = "";
    for (let i = 0; i < b.length; i++) {
      const c = b[i];
      if ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x2a || c === 0x2d || c === 0x2e || c === 0x5f) out += fromCharCode(c);
      else if (c === 0x20) out += "+";
      else out += "%" + (c < 16 ? "0" : "") + c.toString(16).toUpperCase();
    }
    return out;
  }
  function percentDecode(s) {
    const b = utf8Encode(s), out = new U8(b.length);
    let n = 0;
    const hex = (c) => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
    for (let i = 0; i < b.length; i++) {
      if (b[i] === 0x25 && i + 2 < b.length && hex(b[i + 1]) && hex(b[i + 2])) {
        out[n++] = parseInt(fromCharCode(b[i + 1], b[i + 2]), 16); i += 2;
      } else out[n++] = b[i];
    }
    return utf8Decode(out.subarray(0, n), false);
  }
  function formParse(q) {
    const list = [];
    if (q[0] === "?") q = q.slice(1);
    const parts = q.split("&");
    for (let i = 0; i < parts.length; i++) {
      if (parts[i] === "") continue;
      const p = parts[i].replace(/\+/g, " "), eq = p.indexOf("=");
      list.push(eq < 0 ? [percentDecode(p), ""] : [percentDecode(p.slice(0, eq)), percentDecode(p.slice(eq + 1))]);
    }
    return list;
  }
  class URLSearchParams {
    #list = []; #url = null;
    constructor(init) {
      if (init === undefined || init === null) return;
      if (typeof init === "object" || typeof init === "function") {
        if (typeof init[Symbol.iterator] === "function") {
          for (const pair of init) {
            const p = Array.from(pair);
            if (p.length !== 2) throw new TypeError("Each query pair must be an iterable [name, value] tuple");
            this.#list.push([String(p[0]), String(p[1])]);
          }
        } else {
          for (const k of Object.keys(init)) this.#list.push([k, String(init[k])]);
        }
      } else this.#list = formParse(String(init));
    }
    static _link(sp, url, query) { sp.#url = url; sp.#list = formParse(query); }
    static _reset(sp, query) { sp.#list = formParse(query); }
    #update() { if (this.#url) setQuery(this.#url, this.toString()); }
    get size() { return this.#list.length; }
    append(name, value) { this.#list.push([String(name), String(value)]); this.#update(); }
    delete(name, value) {
      name = String(name);
      this.#list = this.#list.filter((p) => !(p[0] === name && (value === undefined || p[1] === String(value))));
      this.#update();
    }
    get(name) { name = String(name); const p = this.#list.find((q) => q[0] === name); return p ? p[1] : null; }
    getAll(name) { name = String(name); return this.#list.filter((p) => p[0] === name).map((p) => p[1]); }
    has(name, value) { name = String(name); return this.#list.some((p) => p[0] === name && (value === undefined || p[1] === String(value))); }
    set(name, value) {
      name = String(name); value = String(value);
      const i = this.#list.findIndex((p) => p[0] === name);
      if (i < 0) this.#list.push([name, value]);
      else { this.#list[i] = [name, value]; this.#list = this.#list.filter((p, j) => j <= i || p[0] !== name); }
      this.#update();
    }
    sort() {
      // stable, by UTF-16 code units
      this.#list = this.#list.map((p, i) => [p, i]).sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1])).map((x) => x[0]);
      this.#update();
    }
    forEach(fn, thisArg) { for (const p of this.#list.slice()) fn.call(thisArg, p[1], p[0], this); }
    *entries() { for (let i = 0; i < this.#list.length; i++) yield [this.#list[i][0], this.#list[i][1]]; }
    *keys() { for (const p of this.entries()) yield p[0]; }
    *values() { for (const p of this.entries()) yield p[1]; }
    [Symbol.iterator]() { return this.entries(); }
    toString() { return this.#list.map((p) => formEncode(p[0]) + "=" + formEncode(p[1])).join("&"); }
    get [Symbol.toStringTag]() { return "URLSearchParams"; }
  }
  const linkParams = URLSearchParams._link, resetParams = URLSearchParams._reset;
  delete URLSearchParams._link; delete URLSearchParams._reset;
  define("URLSearchParams", URLSearchParams);

  // ---- URL: parsed by the host's WHATWG parser, kept here as its parts ----
  const PARTS = ["href", "origin", "protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash"];
  function checkLength(s) {
    if (s.length > maxBytes) throw new RangeError("URL is longer than " + maxBytes + " characters");
    return s;
  }
  class URL {
    #p; #params;
    constructor(input, base) {
      const parts = host("url", checkLength(String(input)), base === undefined ? undefined : checkLength(String(base)));
      if (parts === null) throw new TypeError("Invalid URL");
      this.#p = parts;
      this.#params = new URLSearchParams();
      linkParams(this.#params, this, parts[9]);
    }
    static canParse(input, base) { try { new URL(input, base); return true; } catch (e) { return false; } }
    static parse(input, base) { try { return new URL(input, base); } catch (e) { return null; } }
    #set(part, value) {
      this.#p = host("urlSet", this.#p[0], part, checkLength(String(value)));
      if (part === "href" || part === "search") resetParams(this.#params, this.#p[9]);
    }
    static {
      // private fields are reachable only in the class body
      partOf = (u, i) => { if (!(#p in u)) throw new TypeError("not a URL"); return u.#p[i]; };
      setQuery = (u, q) => { u.#p = host("urlSet", u.#p[0], "search", checkLength(q)); };
      setPart = (u, part, v) => { if (!(#p in u)) throw new TypeError("not a URL"); u.#set(part, v); };
    }
    get searchParams() { return this.#params; }
    toString() { return this.#p[0]; }
    toJSON() { return this.#p[0]; }
    get [Symbol.toStringTag]() { return "URL"; }
  }
  // one accessor per part (origin is read-only)
  for (let i = 0; i < PARTS.length; i++) {
    const part = PARTS[i];
    const desc = { get() { return partOf(this, i); }, configurable: true, enumerable: true };
    if (part !== "origin") desc.set = function (v) { setPart(this, part, v); };
    Object.defineProperty(URL.prototype, part, desc);
  }
  define("URL", URL);

  // ---- structuredClone: V8's own serializer, through the host ----
  function structuredClone(value, options) {
    if (arguments.length < 1) throw new TypeError("structuredClone requires 1 argument");
    if (options && options.transfer && options.transfer.length) throw new DOMException("transfer is not supported in functions", "DataCloneError");
    try { return host("clone", value); }
    catch (e) { throw new DOMException(e && e.message ? e.message : "could not be cloned", "DataCloneError"); }
  }
  define("structuredClone", structuredClone);

  // ---- crypto ----
  function getRandomValues(array) {
    if (!(array instanceof Int8Array || array instanceof U8 || array instanceof Uint8ClampedArray || array instanceof Int16Array ||
        array instanceof Uint16Array || array instanceof Int32Array || array instanceof Uint32Array ||
        array instanceof BigInt64Array || array instanceof BigUint64Array)) {
      throw new DOMException("The data argument must be an integer-type TypedArray", "TypeMismatchError");
    }
    if (array.byteLength > 65536) throw new DOMException("The ArrayBufferView's byte length (" + array.byteLength + ") exceeds the number of bytes of entropy available via this API (65536)", "QuotaExceededError");
    new U8(array.buffer, array.byteOffset, array.byteLength).set(new U8(host("random", array.byteLength)));
    return array;
  }
  function randomUUID() { return host("uuid"); }

  const HASHES = ["SHA-1", "SHA-256", "SHA-384", "SHA-512"];
  function normalize(alg) {
    const name = typeof alg === "string" ? alg : alg && typeof alg === "object" ? String(alg.name) : "";
    return name.toUpperCase();
  }
  function hashOf(alg) {
    const h = normalize(alg);
    if (HASHES.indexOf(h) < 0) throw new DOMException("Unrecognized algorithm name (supported: " + HASHES.join(", ") + ")", "NotSupportedError");
    return h;
  }
  const keyData = new WeakMap();
  class CryptoKey {
    constructor() { throw new TypeError("Illegal constructor"); }
    get type() { return keyData.get(this).type; }
    get extractable() { return keyData.get(this).extractable; }
    get algorithm() { const k = keyData.get(this); return { name: "HMAC", hash: { name: k.hash }, length: k.bytes.length * 8 }; }
    get usages() { return keyData.get(this).usages.slice(); }
    get [Symbol.toStringTag]() { return "CryptoKey"; }
  }
  function hmacKey(key, usage) {
    const k = key !== null && typeof key === "object" ? keyData.get(key) : undefined;
    if (!k) throw new TypeError("key is not a CryptoKey");
    if (k.usages.indexOf(usage) < 0) throw new DOMException("key usages do not permit this operation", "InvalidAccessError");
    return k;
  }
  function checkHmac(alg) {
    if (normalize(alg) !== "HMAC") throw new DOMException("Unrecognized algorithm name (supported: HMAC)", "NotSupportedError");
  }
  // each method settles a promise, as in browsers: a throw becomes a rejection
  const later = (fn) => function () { const args = arguments; return new PromiseCtor((resolve) => resolve(fn.apply(undefined, args))); };
  const subtle = Object.freeze({
    digest: later(function (alg, data) {
      const h = hashOf(alg);
      return host("digest", h, toBytes(data, "data"));
    }),
    importKey: later(function (format, raw, alg, extractable, usages) {
      if (format !== "raw") throw new DOMException("only the \"raw\" key format is supported in functions", "NotSupportedError");
      checkHmac(alg);
      const h = hashOf(alg.hash);
      const bytes = toBytes(raw, "keyData");
      if (bytes.length === 0) throw new DOMException("the key is empty", "DataError");
      const use = Array.from(usages || []).map(String);
      for (const u of use) if (u !== "sign" && u !== "verify") throw new SyntaxError("invalid key usage for HMAC: " + u);
      const key = Object.create(CryptoKey.prototype);
      keyData.set(key, { type: "secret", extractable: !!extractable, hash: h, bytes: bytes, usages: use });
      return key;
    }),
    exportKey: later(function (format, key) {
      const k = key !== null && typeof key === "object" ? keyData.get(key) : undefined;
      if (!k) throw new TypeError("key is not a CryptoKey");
      if (format !== "raw") throw new DOMException("only the \"raw\" key format is supported in functions", "NotSupportedError");
      if (!k.extractable) throw new DOMException("key is not extractable", "InvalidAccessError");
      return k.bytes.slice().buffer;
    }),
    sign: later(function (alg, key, data) {
      checkHmac(alg);
      const k = hmacKey(key, "sign");
      return host("hmac", k.hash, k.bytes, toBytes(data, "data"));
    }),
    verify: later(function (alg, key, signature, data) {
      checkHmac(alg);
      const k = hmacKey(key, "verify");
      return host("verify", k.hash, k.bytes, toBytes(data, "data"), toBytes(signature, "signature"));
    }),
  });
  define("CryptoKey", CryptoKey);
  define("crypto", Object.freeze({ getRandomValues: getRandomValues, randomUUID: randomUUID, subtle: subtle }));
})`;
