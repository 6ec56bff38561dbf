// The code that runs inside every function isolate before the function's own
// module. It evaluates to a factory taking the host's db Reference and the
// limits; the factory installs `console`, removes `WebAssembly`, `Atomics`
// and `SharedArrayBuffer`, and returns
// `bind(handler)` which gives the per-invocation runner. Everything the
// runner needs is captured here first, so a function that tampers with
// globals or prototypes only changes its own output (the host validates that
// output anyway). The host never hands a host object in: only the db
// Reference (kept in this closure, unreachable from user code) and copies.
//
// Code in the isolate runs only inside a call the host makes (each with a
// time limit): a db call goes out fire-and-forget (applyIgnored) and its
// answer comes back in a later host call (entry 4), never as a promise that
// isolated-vm settles by itself. So nothing of a run can resume once the
// host stops answering it (issue 15 point 1).
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

  // Host calls started and not yet answered. A run that ends with one still
  // pending has left work behind: the host disposes the isolate rather than
  // let that work resume it later, outside any run's time limit.
  let pendingCalls = 0;
  const PromiseCtor = Promise;
  // Resolvers of the calls waiting for their answer, by call id.
  const waiting = Object.create(null);
  let nextCall = 1;
  function callDb(op, a, b) {
    const id = nextCall++;
    pendingCalls++;
    const p = new PromiseCtor(function (resolve) { waiting[id] = resolve; });
    try {
      dbRef.applyIgnored(undefined, [id, op, a, b], { arguments: { copy: true } });
    } catch (e) {
      // arguments that cannot be copied out (functions, symbols)
      delete waiting[id];
      pendingCalls--;
      return PromiseCtor.reject(e);
    }
    return p.then(function (r) {
        if (r && r.ok) return r.results;
        const e = new ErrorCtor(r && r.message ? r.message : "database call failed");
        e.code = r && r.code ? r.code : "query_error";
        throw e;
      });
  }
  // A run's output for the host: "L<n>:" in front when n host calls were
  // still pending when it finished (the JSON output starts with "{").
  function tagged(s) { return pendingCalls > 0 ? "L" + pendingCalls + ":" + s : s; }
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
    // Input, output and db answers cross the isolate boundary as one JSON
    // string each: cheaper than structured copies of the request object.
    //   entry(1, input, notify): starts a run. In a synchronous host call
    //     the isolate drains its microtasks before the call returns, so a
    //     run that does not wait on the host has finished by then. With
    //     notify, doneRef gets the output when the run finishes;
    //   entry(2): the finished run's output, or undefined when it is still
    //     waiting (on db calls): then doneRef gets the output when it settles;
    //   entry(4, answers): the answers of db calls, [[id, reply], ...]; the
    //     run goes on within this call.
    // Outputs are tagged (see tagged()).
    let out, notify = false;
    return function entry(mode, input, notifyNow) {
      if (mode === 4) {
        const answers = parse(input);
        for (let i = 0; i < answers.length; i++) {
          const id = answers[i][0];
          const resolve = waiting[id];
          if (resolve === undefined) continue;
          delete waiting[id];
          pendingCalls--;
          resolve(answers[i][1]);
        }
        return undefined;
      }
      if (mode === 2) {
        if (out === undefined) notify = true;
        return out;
      }
      const args = parse(input);
      out = undefined; notify = notifyNow === true;
      invoke(args[0], args[1]).then(stringify).then(function (s) {
        out = tagged(s);
        if (notify) doneRef.applyIgnored(undefined, [out]);
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
