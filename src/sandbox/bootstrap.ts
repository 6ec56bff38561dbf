// The code that runs inside every function isolate before the function's own
// module. It evaluates to a factory taking the host's db Reference and the
// limits; the factory installs `console`, removes `WebAssembly`, `Atomics`
// and `SharedArrayBuffer`, and returns
// `bind(handler)` which gives the per-invocation runner. Everything the
// runner needs is captured here first, so a function that tampers with
// globals or prototypes only changes its own output (the host validates that
// output anyway). The host never hands a host object in: only the db
// Reference (kept in this closure, unreachable from user code) and copies.
export const BOOTSTRAP_SOURCE = String.raw`(function (dbRef, limits) {
  "use strict";
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const hasOwn = Object.hasOwn;
  const keys = Object.keys;
  const freeze = Object.freeze;
  const isArray = Array.isArray;
  const ErrorCtor = Error;
  const StringCtor = String;
  const maxLogChars = limits.maxLogChars;
  const maxLine = limits.maxLogLineChars;
  const maxBody = limits.maxResponseBytes;

  let logs = [];
  let logChars = 0;
  let truncated = false;

  function show(v) {
    if (typeof v === "string") return v;
    if (v instanceof ErrorCtor) { try { return StringCtor(v.stack || v); } catch (e) { return "[error]"; } }
    try {
      const s = stringify(v);
      return s === undefined ? StringCtor(v) : s;
    } catch (e) {
      try { return StringCtor(v); } catch (e2) { return "[unprintable]"; }
    }
  }
  function capture(level) {
    return function () {
      if (truncated) return;
      let line = "";
      for (let i = 0; i < arguments.length; i++) line += (i ? " " : "") + show(arguments[i]);
      if (line.length > maxLine) line = line.slice(0, maxLine) + "…";
      if (logChars + line.length > maxLogChars) { truncated = true; return; }
      logChars += line.length;
      logs[logs.length] = { level: level, message: line };
    };
  }
  delete globalThis.WebAssembly;
  // Atomics.wait would block the service's thread (a run's synchronous slice
  // runs on it) without using CPU, unseen by the CPU-time budget: no shared
  // memory and no Atomics in a function.
  delete globalThis.Atomics;
  delete globalThis.SharedArrayBuffer;
  globalThis.console = freeze({
    log: capture("log"), info: capture("info"), debug: capture("debug"),
    warn: capture("warn"), error: capture("error"),
  });

  function callDb(op, a, b) {
    return dbRef.apply(undefined, [op, a, b], { arguments: { copy: true }, result: { promise: true, copy: true } })
      .then(function (r) {
        if (r && r.ok) return r.results;
        const e = new ErrorCtor(r && r.message ? r.message : "database call failed");
        e.code = r && r.code ? r.code : "query_error";
        throw e;
      });
  }
  const db = freeze({
    query: function (sql, params) { return callDb("query", sql, params === undefined ? null : params); },
    batch: function (statements, opts) { return callDb("batch", statements, !!(opts && opts.transaction)); },
  });

  function errorText(e) {
    try {
      if (e instanceof ErrorCtor) return StringCtor(e.name) + ": " + StringCtor(e.message);
      return "Uncaught " + show(e);
    } catch (x) { return "Uncaught exception"; }
  }

  function shape(result) {
    let status, headers = [], body, text = false;
    if (result !== null && typeof result === "object" && !isArray(result) && hasOwn(result, "body")) {
      status = result.status;
      if (typeof status !== "number" && status !== undefined) status = StringCtor(status);
      const h = result.headers;
      if (h !== null && typeof h === "object") {
        const ks = keys(h);
        for (let i = 0; i < ks.length && i < 200; i++) headers[i] = [ks[i], StringCtor(h[ks[i]])];
      }
      body = result.body;
      // Only a shaped string body is sent as text (DECISIONS 21).
      if (typeof body === "string") text = true;
    } else {
      body = result;
    }
    if (!text) {
      body = stringify(body === undefined ? null : body);
      if (body === undefined) body = "null";
    }
    // Cheap first check in characters; the host checks bytes exactly.
    if (body.length > maxBody) throw new ErrorCtor("response body larger than " + maxBody + " bytes");
    return { status: status, headers: headers, body: body, text: text };
  }

  return function bind(handler, doneRef) {
    // Input and output cross the isolate boundary as one JSON string each:
    // cheaper than structured copies of the request object.
    //   entry(0, input): the whole run as a promise (the host awaits it on
    //     isolated-vm's thread: the slow path);
    //   entry(1, input): starts a run inside a synchronous host call; the
    //     isolate drains its microtasks before that call returns, so a run
    //     that does not wait on the host has finished by then;
    //   entry(2): the finished run's output, or undefined when it is still
    //     waiting (on db calls): then doneRef gets the output when it settles;
    //   entry(3): nothing (the host's async check that the isolate is free).
    let out, notify = false;
    return function entry(mode, input) {
      if (mode === 3) return undefined;
      if (mode === 2) {
        if (out === undefined) notify = true;
        return out;
      }
      const args = parse(input);
      const p = invoke(args[0], args[1]).then(stringify);
      if (mode === 0) return p;
      out = undefined; notify = false;
      p.then(function (s) {
        out = s;
        if (notify) doneRef.applyIgnored(undefined, [s]);
      });
      return undefined;
    };
    async function invoke(req, ctx) {
      logs = []; logChars = 0; truncated = false;
      const context = freeze({
        consumer: ctx.consumer, event: ctx.event, env: freeze(ctx.env),
        db: db, trigger: ctx.trigger, requestId: ctx.requestId,
      });
      try {
        const result = await handler(req, context);
        let response;
        try { response = shape(result); }
        catch (e) { return { error: "Invalid response: " + errorText(e), logs: logs, truncated: truncated }; }
        return { response: response, logs: logs, truncated: truncated };
      } catch (e) {
        return { error: errorText(e), logs: logs, truncated: truncated };
      }
    }
  };
})`;
