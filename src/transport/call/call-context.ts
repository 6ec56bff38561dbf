// The HandlerContext every unary call gets, whatever its protocol (REST,
// Connect, gRPC, gRPC-Web): what connect-es's createHandlerContext gives a
// service, built lazily. The AbortController, the request Headers and the
// response Headers exist only once a service (or a deadline) asks for them:
// a call that reads none of them allocates none (docs/architecture.md, "One
// request through each protocol").
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type HandlerContext } from "@connectrpc/connect";
import type { IncomingHttpHeaders } from "node:http";

/** What a call whose client went away is cancelled with (as connect-node cancels it). */
export function clientClosed(): ConnectError {
  return new ConnectError("the client closed the call", Code.Canceled);
}

export class CallContext implements HandlerContext {
  private controller?: AbortController;
  private abortReason?: unknown;
  private aborted = false;
  private reqHeaders?: Headers;
  private resHeaders?: Headers;
  private trailers?: Headers;
  /** Date.now() at which the call's deadline passes (connect-timeout-ms, grpc-timeout). */
  readonly deadlineAt: number | undefined;

  constructor(
    readonly service: DescService,
    readonly method: DescMethod,
    readonly protocolName: string,
    readonly requestMethod: string,
    readonly url: string,
    private readonly rawHeaders: IncomingHttpHeaders,
    readonly values: ContextValues,
    timeoutMs?: number,
  ) {
    this.deadlineAt = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  timeoutMs(): number | undefined {
    return this.deadlineAt === undefined ? undefined : this.deadlineAt - Date.now();
  }

  /** Aborts the signal (the deadline passed, the client went away, the call ended). */
  abort(reason?: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.abortReason = reason;
    this.controller?.abort(reason);
  }

  get requestHeader(): Headers {
    if (!this.reqHeaders) {
      const h = new Headers();
      for (const k in this.rawHeaders) {
        const v = this.rawHeaders[k];
        if (k.startsWith(":") || v === undefined) continue;
        if (Array.isArray(v)) for (const x of v) h.append(k, x);
        else h.set(k, v);
      }
      this.reqHeaders = h;
    }
    return this.reqHeaders;
  }

  get responseHeader(): Headers {
    return (this.resHeaders ??= new Headers());
  }

  get responseTrailer(): Headers {
    return (this.trailers ??= new Headers());
  }

  /** Response headers a service set, if any. */
  get setHeaders(): Headers | undefined {
    return this.resHeaders;
  }

  /** Response trailers a service set, if any. */
  get setTrailers(): Headers | undefined {
    return this.trailers;
  }
}
