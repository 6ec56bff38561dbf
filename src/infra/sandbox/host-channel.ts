// The host side of the functions' host capabilities (ctx.db, ctx.kv, ...;
// docs/functions-internals.md, "Host capabilities"). A call comes out of an isolate
// fire-and-forget (bootstrap.ts) as (id, capability, method, args); it is
// held to its run's limits per capability, handed to the method with the
// run's AbortSignal, and its reply goes back in with the next call the host
// makes into the isolate (function-isolate.ts). Once a run has ended none of
// its calls is answered: waiting ones never start, and the signal tells the
// running ones to stop.
import type { ConnectError } from "@connectrpc/connect";
import { catalogue, errorDetail } from "../../kernel/errors.js";
import type { HostCall, HostCapability } from "../../kernel/host-capability.js";
import type { SandboxLimits } from "./types.js";

/** What goes back into the isolate for one call (the isolate turns a failure into an Error with `code`). */
export type HostReply = { ok: true; result: unknown } | { ok: false; code: string; message: string };

/** One run's side of the channel: its deadline, its signal and, per capability, the calls going and waiting. */
export class HostRun implements HostCall {
  private controller: AbortController | undefined;
  ended = false;
  /** Made on the first call, like the signal. */
  slots: Map<string, { active: number; waiting: Array<() => void> }> | undefined;
  /** Replies ready to go into the isolate: [call id, reply]. */
  outbox: Array<[number, HostReply]> = [];

  constructor(
    readonly appId: number,
    readonly deadlineAt: number,
    readonly consumer?: { readonly consumerId: number; readonly userId: string },
  ) {}

  // Made on the first call that reads it: a run that makes none allocates nothing.
  get signal(): AbortSignal {
    return (this.controller ??= new AbortController()).signal;
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.outbox = [];
    for (const s of this.slots?.values() ?? []) s.waiting.length = 0;
    this.controller?.abort();
  }
}

function failure(cap: HostCapability, err: unknown): HostReply {
  const d = errorDetail(err);
  if (!d) return { ok: false, code: cap.failureCode, message: catalogue[cap.failureCode].message };
  const message = (err as ConnectError).rawMessage;
  // the field errors, unless the message names every field already
  if (d.fieldViolations.every((v) => message.includes(v.field))) return { ok: false, code: d.code, message };
  return { ok: false, code: d.code, message: `${message} (${d.fieldViolations.map((v) => `${v.field}: ${v.messages.join(", ")}`).join("; ")})` };
}

/** Routes the calls of an isolate's runs to their capabilities; `reply` gets one reply per call. */
export function hostDispatch(
  capabilities: readonly HostCapability[],
  limits: Pick<SandboxLimits, "hostCallsRunning" | "hostCallsQueued">,
  reply: (run: HostRun, id: number, reply: HostReply) => void,
): (run: HostRun, id: number, name: string, method: string, args: unknown[]) => void {
  const byName = new Map(capabilities.map((c) => [c.name, c]));
  return (run, id, name, method, args) => {
    const cap = byName.get(name);
    const fn = cap && Object.hasOwn(cap.methods, method) ? cap.methods[method] : undefined;
    if (!cap || !fn) return reply(run, id, { ok: false, code: "validation_failed", message: `ctx.${name}.${method} does not exist` });
    let slots = (run.slots ??= new Map()).get(name);
    if (!slots) run.slots.set(name, (slots = { active: 0, waiting: [] }));
    const start = () => {
      slots.active++;
      const done = (r: HostReply) => {
        slots.active--;
        slots.waiting.shift()?.();
        reply(run, id, r);
      };
      new Promise((resolve) => resolve(fn(run, ...args))).then((result) => done({ ok: true, result }), (err: unknown) => done(failure(cap, err)));
    };
    const own = cap.callLimits;
    if (slots.active < (own?.running ?? limits.hostCallsRunning)) start();
    else if (slots.waiting.length < (own?.queued ?? limits.hostCallsQueued)) slots.waiting.push(start);
    else {
      const message = own?.busyMessage ?? `too many ctx.${name} calls in this invocation: at most ${limits.hostCallsRunning} running and ${limits.hostCallsQueued} waiting; await them`;
      reply(run, id, { ok: false, code: cap.busyCode, message });
    }
  };
}
