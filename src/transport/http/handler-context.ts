// A HandlerContext for calls that arrive over REST. The gateway calls the
// same service implementations the Connect handlers call, in process; this
// context is lighter than connect's createHandlerContext (no AbortController,
// headers converted only when a service reads them).
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import type { ContextValues, HandlerContext } from "@connectrpc/connect";
import type { IncomingHttpHeaders } from "node:http";

const never = new AbortController().signal;

export class RestHandlerContext implements HandlerContext {
  readonly protocolName = "rest";
  readonly signal: AbortSignal;
  private reqHeaders?: Headers;
  private resHeaders?: Headers;
  private trailers?: Headers;

  constructor(
    readonly service: DescService,
    readonly method: DescMethod,
    readonly requestMethod: string,
    readonly url: string,
    private readonly rawHeaders: IncomingHttpHeaders,
    readonly values: ContextValues,
    signal?: AbortSignal,
  ) {
    this.signal = signal ?? never;
  }

  timeoutMs(): number | undefined {
    return undefined;
  }

  get requestHeader(): Headers {
    if (!this.reqHeaders) {
      const h = new Headers();
      for (const [k, v] of Object.entries(this.rawHeaders)) {
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
}
