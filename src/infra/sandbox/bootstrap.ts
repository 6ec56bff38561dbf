// The code that runs inside every function isolate before the function's own
// module. It evaluates to a factory taking the host channel's Reference and
// the limits with the host capabilities' method names (capabilities: { db:
// ["query", "batch"], ... }); the factory installs `console`, removes `WebAssembly`, `Atomics`
// and `SharedArrayBuffer`, builds one frozen object per capability (ctx.db,
// ctx.kv, ...), installs the timers (timers.ts) and returns `bind(handler)` which gives the per-invocation
// runner. Everything the runner needs is captured here first, so a function
// that tampers with globals or prototypes only changes its own output (the
// host validates that output anyway). The host never hands a host object in:
// only the channel's Reference (kept in this closure, unreachable from user
// code) and copies.
//
// Code in the isolate runs only inside a call the host makes (each with a
// time limit): a host call goes out fire-and-forget (applyIgnored) and its
// answer comes back in a later host call (entry 4), never as a promise that
// isolated-vm settles by itself. So nothing of a run can resume once the
// host stops answering it. Timers (timers.ts) are the same: the host enters
// to run them (entries 4 with `wake`, and 5).
import { MAX_WAIT_UNTIL_PER_RUN } from "./timers.js";
import { MAX_ERROR_CHARS, MAX_RAW_STACK_CHARS, MAX_STACK_FRAMES } from "./error-stack.js";

export const BOOTSTRAP_SOURCE = String.raw`(function (hostRef, limits, installTimers, wakeRef, installFetch) {
  "use strict";
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const hasOwn = Object.hasOwn;
  const keys = Object.keys;
  const freeze = Object.freeze;
  const isArray = Array.isArray;
  const ErrorCtor = Error;
  const StringCtor = String;
  const U8 = Uint8Array;
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
  // room for the frames an error's stack keeps (error-stack.ts); a function may change it
  ErrorCtor.stackTraceLimit = ${MAX_STACK_FRAMES};
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
  // setTimeout & co. (timers.ts); an exception in a callback goes to the log
  const timers = installTimers(wakeRef, capture("error"));
  const RangeErrorCtor = RangeError;
  const logBackground = capture("error");

  const PromiseCtor = Promise;
  // [resolve, capability] of the host calls waiting for their answer, by
  // call id. A run that ends with one still pending has left work behind:
  // the host disposes the isolate rather than let that work resume it
  // later, outside any run's time limit.
  const waiting = Object.create(null);
  let nextCall = 1;
  // ticket (from fetch-api.ts only) gets the call's id, which forget() takes
  function callHost(name, method, args, ticket) {
    const id = nextCall++;
    if (ticket) ticket.id = id;
    const p = new PromiseCtor(function (resolve) { waiting[id] = [resolve, name]; });
    try {
      hostRef.applyIgnored(undefined, [id, name, method, args], { arguments: { copy: true } });
    } catch (e) {
      // arguments that cannot be copied out (functions, symbols)
      delete waiting[id];
      return PromiseCtor.reject(e);
    }
    return p.then(function (r) {
        if (r && r.ok) return r.result;
        const e = new ErrorCtor(r && r.message ? r.message : "host call failed");
        e.code = r && r.code ? r.code : "internal_error";
        throw e;
      });
  }
  // The global fetch (fetch-api.ts) uses its capabilities itself: they are not on ctx.
  const hidden = limits.hidden || [];
  // It returns what resets its per-run count at each run's start.
  const resetFetch = installFetch ? installFetch(callHost, function (id) { delete waiting[id]; }, hasOwn(limits.capabilities, "fetch"), limits.fetchSubrequests) : undefined;
  // ctx.<name> for every capability: one function per method name.
  const host = Object.create(null);
  const names = keys(limits.capabilities).filter(function (n) { return hidden.indexOf(n) < 0; });
  for (let i = 0; i < names.length; i++) {
    const name = names[i], methods = limits.capabilities[name], api = {};
    // methods named <m>AsConsumer make ctx.<name>.asConsumer().<m> (host-capability.ts)
    let asConsumer;
    for (let j = 0; j < methods.length; j++) {
      const method = methods[j];
      const fn = function (...args) { return callHost(name, method, args); };
      if (method.length > 10 && method.slice(-10) === "AsConsumer") {
        asConsumer = asConsumer || {};
        asConsumer[method.slice(0, -10)] = fn;
      } else api[method] = fn;
    }
    if (asConsumer) {
      const view = freeze(asConsumer);
      api.asConsumer = function () { return view; };
    }
    host[name] = freeze(api);
  }
  // The calls still pending when a run finished, per capability (no
  // prototype: what a function does to Object.prototype cannot hide them);
  // undefined (left out of the output) when none.
  function leftCalls() {
    let left;
    for (const id in waiting) {
      left = left || Object.create(null);
      left[waiting[id][1]] = (left[waiting[id][1]] || 0) + 1;
    }
    return left;
  }

  function cut(s) { return s.length > ${MAX_ERROR_CHARS} ? s.slice(0, ${MAX_ERROR_CHARS}) + "…" : s; }
  function errorText(e) {
    try {
      if (e instanceof ErrorCtor) return cut(StringCtor(e.name) + ": " + StringCtor(e.message));
      return cut("Uncaught " + show(e));
    } catch (x) { return "Uncaught exception"; }
  }

  // A failed run's output. For a thrown Error also its name, message and the
  // frames of its stack (the part after "Name: message", which the host
  // rebuilds), cleaned by the host (error-stack.ts): read only on failure.
  function failed(e) {
    const o = { error: errorText(e), logs: logs, truncated: truncated };
    if (e instanceof ErrorCtor) {
      try {
        const name = cut(StringCtor(e.name)), message = cut(StringCtor(e.message)), stack = e.stack;
        o.name = name; o.message = message;
        if (typeof stack === "string") {
          const at = stack.indexOf("\n    at ");
          o.stack = at < 0 ? "" : stack.slice(at, at + ${MAX_RAW_STACK_CHARS});
        }
      } catch (x) { /* a getter that throws: the text alone */ }
    }
    return o;
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
      // Only a shaped string body is sent as text (docs/functions.md, "Response shaping").
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
    // Input, output and host answers cross the isolate boundary as one JSON
    // string each: cheaper than structured copies of the request object.
    //   entry(1, input, notify, run, deadline): starts run number "run", due to
    //     end at "deadline" (Date.now() ms; timers due later never fire). In a synchronous host call
    //     the isolate drains its microtasks before the call returns, so a
    //     run that does not wait on the host has finished by then. With
    //     notify, doneRef gets the output when the run finishes;
    //   entry(2): the finished run's output, or undefined when it is still
    //     waiting (on host calls): then doneRef gets the output when it settles;
    //   entry(4, answers, wake, bytes): the answers of host calls, [[id, reply], ...]; the
    //     run goes on within this call; with wake, then the timers due run;
    //     bytes: ArrayBuffers a result's "bytes" index points to (fetched bodies);
    //   entry(5): the timers due run (the host's timer rang).
    // A run that handed work to ctx.waitUntil answers first (its output has
    // bg: true) and goes on until that work settles; then doneRef gets the
    // background's output ({ logs, truncated, left }).
    let out, notify = false;
    return function entry(mode, input, notifyNow, run, deadlineAt) {
      if (mode === 5) {
        timers.runDue();
        return undefined;
      }
      if (mode === 4) {
        const answers = parse(input);
        // run: the bytes of the answers' results, copied beside the JSON (a result's bytes is their index)
        const bytes = run;
        for (let i = 0; i < answers.length; i++) {
          const id = answers[i][0];
          const w = waiting[id];
          if (w === undefined) continue;
          delete waiting[id];
          const r = answers[i][1];
          if (bytes !== undefined && r && r.ok && r.result && typeof r.result.bytes === "number") r.result.bytes = new U8(bytes[r.result.bytes]);
          w[0](r);
        }
        if (notifyNow === true) timers.runDue();
        return undefined;
      }
      if (mode === 2) {
        if (out === undefined) notify = true;
        return out;
      }
      const args = parse(input);
      out = undefined; notify = notifyNow === true;
      timers.reset(run, deadlineAt);
      const bg = [];
      invoke(args[0], args[1], bg).then(function (o) {
        if (bg.length === 0) {
          bg.closed = true;
          o.left = leftCalls();
          timers.reset(0, 0);
        } else o.bg = true;
        out = stringify(o);
        // the background's lines come with its own output (the limit counts both)
        logs = [];
        if (notify) doneRef.applyIgnored(undefined, [out]);
        if (bg.length > 0) background(bg);
      });
      return undefined;
    };
    // Waits for every ctx.waitUntil promise, also those handed over meanwhile.
    async function background(bg) {
      for (let i = 0; i < bg.length; i++) await bg[i];
      bg.closed = true;
      timers.reset(0, 0);
      doneRef.applyIgnored(undefined, [stringify({ logs: logs, truncated: truncated, left: leftCalls() })]);
    }
    function waitUntil(bg) {
      return function waitUntil(promise) {
        // a ctx kept from an ended run: its work would never be waited for, nor its timers fire
        if (bg.closed) throw new ErrorCtor("ctx.waitUntil belongs to an invocation that has ended: use the ctx of the current one");
        if (bg.length >= ${MAX_WAIT_UNTIL_PER_RUN}) throw new RangeErrorCtor("too many ctx.waitUntil calls: at most ${MAX_WAIT_UNTIL_PER_RUN} in one invocation");
        bg[bg.length] = PromiseCtor.resolve(promise).then(undefined, function (e) { logBackground("A ctx.waitUntil promise rejected:", e); });
      };
    }
    async function invoke(req, ctx, bg) {
      logs = []; logChars = 0; truncated = false;
      if (resetFetch) resetFetch();
      const context = {
        consumer: ctx.consumer, event: ctx.event, env: freeze(ctx.env),
        trigger: ctx.trigger, requestId: ctx.requestId, waitUntil: waitUntil(bg),
      };
      for (let i = 0; i < names.length; i++) context[names[i]] = host[names[i]];
      freeze(context);
      try {
        const result = await handler(req, context);
        let response;
        try { response = shape(result); }
        catch (e) { return { error: "Invalid response: " + errorText(e), logs: logs, truncated: truncated }; }
        return { response: response, logs: logs, truncated: truncated };
      } catch (e) {
        return failed(e);
      }
    }
  };
})`;
