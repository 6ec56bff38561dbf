// The isolate's side of `fetch` (docs/functions.md, "Calling other services:
// fetch"): WHATWG-shaped `fetch`, `Request`, `Response`, `Headers`,
// `AbortController` and `AbortSignal`, in plain JS inside the isolate. The
// request itself is made by the host (fetch-host.ts) through the host
// capability channel: `fetch` sends a copy of the request as a host call
// (capability "fetch", method "send") and the answer is a copy of the
// response with its whole body. An aborted signal rejects at once with its
// reason and tells the host to cancel (capability "fetchAbort"); the
// bootstrap forgets both calls, so nothing is left pending.
//
// Bodies are read whole (no streams: `response.body` is not offered); the
// limits are the host's.

/** The host capabilities the isolate's fetch uses; never offered on ctx. */
export const FETCH_CAPABILITIES = ["fetch", "fetchAbort"] as const;

// Evaluates to an installer (the Web APIs it builds on captured first); the bootstrap calls it with its channel:
// install(callHost(name, method, args, ticket), forget(id), enabled,
// maxSubrequests) returns the reset called at each run's start.
export const FETCH_API_SOURCE = String.raw`(function () {
  "use strict";
  const TE = TextEncoder, TD = TextDecoder, URLC = URL, USP = URLSearchParams, DOMExc = DOMException;
  const U8 = Uint8Array, AB = ArrayBuffer, PromiseCtor = Promise, TypeErr = TypeError, StringCtor = String;
  const isView = ArrayBuffer.isView, parse = JSON.parse, stringify = JSON.stringify, freeze = Object.freeze;
  const define = (name, value) => Object.defineProperty(globalThis, name, { value: value, writable: true, configurable: true, enumerable: false });
  const encoder = new TE(), decoder = new TD();
  const TOKEN = /^[!#$%&'*+\-.^_\x60|~0-9A-Za-z]+$/;
  const INTERNAL = {};

  return function install(callHost, forget, enabled, maxSubrequests) {
    // ---------------------------------------------------------------- Headers
    function normName(name) {
      name = StringCtor(name);
      if (!TOKEN.test(name)) throw new TypeErr("Invalid header name: " + stringify(name));
      return name.toLowerCase();
    }
    function normValue(value) {
      value = StringCtor(value).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, "");
      if (/[\0\r\n]/.test(value)) throw new TypeErr("Invalid header value");
      return value;
    }
    class Headers {
      #list = [];
      constructor(init) {
        if (init === undefined || init === null) return;
        if (init instanceof Headers) { this.#list = init.#list.map((p) => [p[0], p[1]]); return; }
        if (typeof init !== "object" && typeof init !== "function") throw new TypeErr("Headers: init must be an object, an array of pairs or Headers");
        if (typeof init[Symbol.iterator] === "function") {
          for (const pair of init) {
            const p = Array.from(pair);
            if (p.length !== 2) throw new TypeErr("Headers: each pair must have a name and a value");
            this.append(p[0], p[1]);
          }
        } else {
          for (const k of Object.keys(init)) this.append(k, init[k]);
        }
      }
      append(name, value) { this.#list.push([normName(name), normValue(value)]); }
      delete(name) { const n = normName(name); this.#list = this.#list.filter((p) => p[0] !== n); }
      get(name) {
        const n = normName(name), vs = [];
        for (const p of this.#list) if (p[0] === n) vs.push(p[1]);
        return vs.length ? vs.join(", ") : null;
      }
      getSetCookie() { return this.#list.filter((p) => p[0] === "set-cookie").map((p) => p[1]); }
      has(name) { const n = normName(name); return this.#list.some((p) => p[0] === n); }
      set(name, value) {
        const n = normName(name), v = normValue(value);
        const i = this.#list.findIndex((p) => p[0] === n);
        if (i < 0) { this.#list.push([n, v]); return; }
        this.#list[i] = [n, v];
        this.#list = this.#list.filter((p, j) => j <= i || p[0] !== n);
      }
      // sorted by name, values of a name combined (set-cookie: one entry each), as WHATWG says
      #sorted() {
        const names = [...new Set(this.#list.map((p) => p[0]))].sort();
        const out = [];
        for (const n of names) {
          if (n === "set-cookie") { for (const v of this.getSetCookie()) out.push([n, v]); }
          else out.push([n, this.get(n)]);
        }
        return out;
      }
      forEach(fn, thisArg) { for (const p of this.#sorted()) fn.call(thisArg, p[1], p[0], this); }
      *entries() { yield* this.#sorted(); }
      *keys() { for (const p of this.#sorted()) yield p[0]; }
      *values() { for (const p of this.#sorted()) yield p[1]; }
      [Symbol.iterator]() { return this.entries(); }
      get [Symbol.toStringTag]() { return "Headers"; }
      static pairs(h) { return h.#list.map((p) => [p[0], p[1]]); }
    }
    const headerPairs = Headers.pairs;
    delete Headers.pairs;

    // ---------------------------------------------------- AbortController/Signal
    class AbortSignal {
      #aborted = false; #reason = undefined; #listeners = []; onabort = null;
      constructor(token) { if (token !== INTERNAL) throw new TypeErr("Illegal constructor"); }
      get aborted() { return this.#aborted; }
      get reason() { return this.#reason; }
      throwIfAborted() { if (this.#aborted) throw this.#reason; }
      addEventListener(type, listener, options) {
        if (type !== "abort" || listener === null || listener === undefined) return;
        if (this.#listeners.some((l) => l[0] === listener)) return;
        this.#listeners.push([listener, !!(options && typeof options === "object" && options.once)]);
      }
      removeEventListener(type, listener) { if (type === "abort") this.#listeners = this.#listeners.filter((l) => l[0] !== listener); }
      dispatchEvent() { return true; }
      static #fire(signal, reason) {
        if (signal.#aborted) return;
        signal.#aborted = true;
        signal.#reason = reason === undefined ? new DOMExc("This operation was aborted", "AbortError") : reason;
        const event = { type: "abort", target: signal, currentTarget: signal };
        const ls = signal.#listeners;
        signal.#listeners = [];
        if (typeof signal.onabort === "function") { try { signal.onabort.call(signal, event); } catch (e) { /* like a browser: reported, not thrown */ } }
        for (const l of ls) {
          try { if (typeof l[0] === "function") l[0].call(signal, event); else if (l[0] && typeof l[0].handleEvent === "function") l[0].handleEvent(event); }
          catch (e) { /* as above */ }
        }
      }
      static abort(reason) { const s = new AbortSignal(INTERNAL); AbortSignal.#fire(s, reason); return s; }
      static timeout(ms) {
        if (typeof globalThis.setTimeout !== "function") throw new DOMExc("AbortSignal.timeout needs timers", "NotSupportedError");
        const s = new AbortSignal(INTERNAL);
        globalThis.setTimeout(() => AbortSignal.#fire(s, new DOMExc("The operation timed out.", "TimeoutError")), ms);
        return s;
      }
      static any(signals) {
        const s = new AbortSignal(INTERNAL);
        for (const x of signals) if (x.aborted) { AbortSignal.#fire(s, x.reason); return s; }
        for (const x of signals) x.addEventListener("abort", () => AbortSignal.#fire(s, x.reason), { once: true });
        return s;
      }
      static fireOf(signal, reason) { AbortSignal.#fire(signal, reason); }
      get [Symbol.toStringTag]() { return "AbortSignal"; }
    }
    const fire = AbortSignal.fireOf;
    delete AbortSignal.fireOf;
    class AbortController {
      #signal = new AbortSignal(INTERNAL);
      get signal() { return this.#signal; }
      abort(reason) { fire(this.#signal, reason); }
      get [Symbol.toStringTag]() { return "AbortController"; }
    }

    // ----------------------------------------------------------------- Bodies
    // A body is a string or a Uint8Array (owned); null when there is none.
    function bodyOf(init, headers) {
      if (init === undefined || init === null) return null;
      if (typeof init === "string") { if (!headers.has("content-type")) headers.set("content-type", "text/plain;charset=UTF-8"); return init; }
      if (init instanceof USP) {
        if (!headers.has("content-type")) headers.set("content-type", "application/x-www-form-urlencoded;charset=UTF-8");
        return init.toString();
      }
      if (init instanceof AB) return new U8(init.slice(0));
      if (isView(init)) return new U8(init.buffer.slice(init.byteOffset, init.byteOffset + init.byteLength));
      if (typeof init === "object") throw new TypeErr("fetch bodies are strings, ArrayBuffers, typed arrays or URLSearchParams (no streams, Blob or FormData)");
      if (!headers.has("content-type")) headers.set("content-type", "text/plain;charset=UTF-8");
      return StringCtor(init);
    }
    class Body {
      #body; #used = false;
      constructor(token, body) { if (token !== INTERNAL) throw new TypeErr("Illegal constructor"); this.#body = body; }
      get bodyUsed() { return this.#used; }
      #take() {
        if (this.#used) return PromiseCtor.reject(new TypeErr("Body has already been consumed"));
        if (this.#body !== null) this.#used = true;
        return PromiseCtor.resolve(this.#body);
      }
      text() {
        return this.#take().then((b) => {
          if (b === null) return "";
          if (typeof b === "string") return b.charCodeAt(0) === 0xfeff ? b.slice(1) : b;
          return decoder.decode(b);
        });
      }
      json() { return this.text().then(parse); }
      arrayBuffer() { return this.bytes().then((b) => b.buffer); }
      bytes() {
        return this.#take().then((b) => {
          if (b === null) return new U8(0);
          if (typeof b === "string") return encoder.encode(b);
          return new U8(b);
        });
      }
      blob() { return PromiseCtor.reject(new TypeErr("Blob is not available in functions: use arrayBuffer() or text()")); }
      formData() { return PromiseCtor.reject(new TypeErr("FormData is not available in functions: use text() with URLSearchParams")); }
      static raw(b) { return b.#body; }
      static put(b, body) { b.#body = body; }
      static use(b) { if (b.#used) throw new TypeErr("Body has already been consumed"); if (b.#body !== null) b.#used = true; return b.#body; }
    }
    const rawBody = Body.raw, useBody = Body.use, putBody = Body.put;
    delete Body.raw; delete Body.use; delete Body.put;

    // ---------------------------------------------------------------- Request
    const NORMAL = { DELETE: 1, GET: 1, HEAD: 1, OPTIONS: 1, POST: 1, PUT: 1, PATCH: 1 };
    class Request extends Body {
      #url; #method; #headers; #redirect; #signal;
      constructor(input, init) {
        init = init === undefined || init === null ? {} : init;
        let src = input instanceof Request ? input : null;
        let url;
        if (src) url = src.url;
        else {
          const u = URLC.parse(StringCtor(input));
          if (!u) throw new TypeErr("Invalid URL: " + StringCtor(input));
          if (u.username || u.password) throw new TypeErr("Request URLs cannot carry credentials");
          url = u.href;
        }
        let method = init.method !== undefined ? StringCtor(init.method) : src ? src.method : "GET";
        if (!TOKEN.test(method)) throw new TypeErr("Invalid method: " + method);
        if (NORMAL[method.toUpperCase()]) method = method.toUpperCase();
        const headers = new Headers(init.headers !== undefined ? init.headers : src ? src.headers : undefined);
        let body = null;
        if (init.body !== undefined && init.body !== null) body = bodyOf(init.body, headers);
        else if (src && init.body === undefined) body = useBody(src);
        if (body !== null && (method === "GET" || method === "HEAD")) throw new TypeErr("Request with GET/HEAD method cannot have body.");
        super(INTERNAL, body);
        this.#url = url;
        this.#method = method;
        this.#headers = headers;
        const redirect = init.redirect !== undefined ? StringCtor(init.redirect) : src ? src.redirect : "follow";
        if (redirect !== "follow" && redirect !== "manual" && redirect !== "error") throw new TypeErr("Invalid redirect mode: " + redirect);
        this.#redirect = redirect;
        const signal = init.signal !== undefined ? init.signal : src ? src.signal : null;
        if (signal !== null && !(signal instanceof AbortSignal)) throw new TypeErr("signal must be an AbortSignal");
        this.#signal = signal || new AbortSignal(INTERNAL);
      }
      get url() { return this.#url; }
      get method() { return this.#method; }
      get headers() { return this.#headers; }
      get redirect() { return this.#redirect; }
      get signal() { return this.#signal; }
      clone() {
        if (this.bodyUsed) throw new TypeErr("Body has already been consumed");
        const b = rawBody(this);
        return new Request(this.#url, { method: this.#method, headers: this.#headers, body: b, redirect: this.#redirect, signal: this.#signal });
      }
      get [Symbol.toStringTag]() { return "Request"; }
    }

    // --------------------------------------------------------------- Response
    class Response extends Body {
      #status; #statusText; #headers; #url = ""; #redirected = false; #type = "default";
      constructor(body, init) {
        init = init === undefined || init === null ? {} : init;
        const status = init.status === undefined ? 200 : Number(init.status);
        if (!(status >= 200 && status <= 599) || Math.floor(status) !== status) throw new RangeError("Invalid response status: " + StringCtor(init.status));
        const headers = new Headers(init.headers);
        const b = body === undefined || body === null ? null : bodyOf(body, headers);
        if (b !== null && (status === 204 || status === 205 || status === 304)) throw new TypeErr("Response with null body status cannot have body");
        super(INTERNAL, b);
        this.#status = status;
        this.#statusText = init.statusText === undefined ? "" : StringCtor(init.statusText);
        this.#headers = headers;
      }
      get status() { return this.#status; }
      get statusText() { return this.#statusText; }
      get ok() { return this.#status >= 200 && this.#status <= 299; }
      get headers() { return this.#headers; }
      get url() { return this.#url; }
      get redirected() { return this.#redirected; }
      get type() { return this.#type; }
      clone() {
        if (this.bodyUsed) throw new TypeErr("Body has already been consumed");
        return fromHost({ status: this.#status, statusText: this.#statusText, headers: headerPairs(this.#headers), url: this.#url, redirected: this.#redirected, type: this.#type }, rawBody(this));
      }
      static json(data, init) {
        const text = stringify(data);
        if (text === undefined) throw new TypeErr("Response.json: the data cannot be serialised");
        const headers = new Headers(init && init.headers);
        if (!headers.has("content-type")) headers.set("content-type", "application/json");
        return new Response(text, { status: init && init.status, statusText: init && init.statusText, headers: headers });
      }
      static redirect(url, status) {
        status = status === undefined ? 302 : status;
        if (status !== 301 && status !== 302 && status !== 303 && status !== 307 && status !== 308) throw new RangeError("Invalid redirect status");
        const u = URLC.parse(StringCtor(url));
        if (!u) throw new TypeErr("Invalid URL: " + StringCtor(url));
        return new Response(null, { status: status, headers: { location: u.href } });
      }
      static error() {
        return fromHost({ status: 0, statusText: "", headers: [], url: "", redirected: false, type: "error" }, null);
      }
      static setup(r, o) {
        r.#status = o.status; r.#statusText = o.statusText; r.#url = o.url; r.#redirected = o.redirected; r.#type = o.type;
      }
      get [Symbol.toStringTag]() { return "Response"; }
    }
    const setup = Response.setup;
    delete Response.setup;
    function fromHost(o, body) {
      // the host's headers and body as they are (no content-type added)
      const r = new Response(null, { headers: o.headers });
      putBody(r, body);
      setup(r, o);
      return r;
    }

    // ------------------------------------------------------------------ fetch
    // armed by the first run: the module's top-level code runs outside any run, with no limits to count against
    let nextFetch = 1, started = 0, armed = false;
    function fetchError(e) {
      const t = new TypeErr(e && e.message ? e.message : "fetch failed");
      if (e && e.code) t.code = e.code;
      return t;
    }
    function fetch(input, init) {
      // past the run's subrequests: refused here, before any work (the host counts too)
      if (!armed) return PromiseCtor.reject(new TypeErr("fetch is only available while the function runs, not in the module's top-level code"));
      if (enabled && started >= maxSubrequests) {
        const e = new TypeErr("too many fetch calls: at most " + maxSubrequests + " per invocation");
        e.code = "fetch_limit";
        return PromiseCtor.reject(e);
      }
      let request;
      try {
        request = new Request(input, init);
      } catch (e) {
        return PromiseCtor.reject(e);
      }
      const signal = request.signal;
      if (signal.aborted) return PromiseCtor.reject(signal.reason);
      if (!enabled) return PromiseCtor.reject(new TypeErr("fetch is not available here"));
      let body;
      try { body = useBody(request); } catch (e) { return PromiseCtor.reject(e); }
      const fid = nextFetch++;
      started++;
      const ticket = {};
      const sent = callHost("fetch", "send", [fid, { url: request.url, method: request.method, headers: headerPairs(request.headers), body: body, redirect: request.redirect }], ticket);
      return new PromiseCtor(function (resolve, reject) {
        let done = false;
        function onAbort() {
          if (done) return;
          done = true;
          // the answer to the send is no longer wanted, the host cancels the request
          forget(ticket.id);
          const t = {};
          callHost("fetchAbort", "abort", [fid], t).catch(function () {});
          forget(t.id);
          reject(signal.reason);
        }
        signal.addEventListener("abort", onAbort, { once: true });
        sent.then(function (r) {
          if (done) return;
          done = true;
          signal.removeEventListener("abort", onAbort);
          // the body's bytes, copied in beside the answer (function-isolate.ts)
          const body = r.bytes instanceof U8 ? r.bytes : null;
          const nullBody = r.status === 204 || r.status === 205 || r.status === 304 || request.method === "HEAD";
          resolve(fromHost({ status: r.status, statusText: r.statusText, headers: r.headers, url: r.url, redirected: r.redirected, type: "basic" }, nullBody ? null : body));
        }, function (e) {
          if (done) return;
          done = true;
          signal.removeEventListener("abort", onAbort);
          reject(fetchError(e));
        });
      });
    }

    define("Headers", Headers);
    define("Request", Request);
    define("Response", Response);
    define("AbortController", AbortController);
    define("AbortSignal", AbortSignal);
    define("fetch", fetch);
    return function reset() { started = 0; armed = true; };
  };
})()`;
