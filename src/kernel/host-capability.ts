// A host API offered to functions (docs/functions-internals.md, "Host capabilities"):
// declared by the capability that owns it in its module definition, carried
// by the sandbox's host channel (src/infra/sandbox/host-channel.ts).
import type { ErrorCode } from "./errors.js";

/** What a host capability's method knows of the call besides its arguments. */
export interface HostCall {
  /** The application whose function made the call. */
  readonly appId: number;
  /** Fires when the run ends (answered, timed out, cut): what the call still waits for or runs is no longer wanted. */
  readonly signal: AbortSignal;
  /** The consumer whose request started the run (an HTTP trigger with a consumer token), if any. */
  readonly consumer?: { readonly consumerId: number; readonly userId: string };
}

/**
 * A host API offered to functions as `ctx.<name>`: methods get copies of the arguments (untrusted)
 * (a method named `<m>AsConsumer` is offered as `ctx.<name>.asConsumer().<m>`: the same call made
 * with the rights of the run's consumer)
 * and return JSON; calls past the per-run limits fail with `busyCode`, a method's non-catalogue
 * error reaches the function as `failureCode`.
 */
export interface HostCapability {
  readonly name: string;
  readonly methods: Readonly<Record<string, (call: HostCall, ...args: unknown[]) => Promise<unknown>>>;
  readonly busyCode: ErrorCode;
  /** This capability's own bounds instead of the sandbox's hostCallsRunning / hostCallsQueued, and the message of a call refused past them. */
  readonly callLimits?: { running: number; queued: number; busyMessage: string };
  readonly failureCode: ErrorCode;
}
