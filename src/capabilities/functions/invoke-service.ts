// pulsebase.platform.v1.FunctionService: the HTTP trigger /api/fn/{slug}
// with a consumer token, and /api/fn/{app_key}/{slug} without one for public
// and signed triggers (passthrough methods: raw request in, raw response out).
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import { FunctionService } from "../../../gen/pulsebase/platform/v1/functions_pb.js";
import type { HttpResponseSchema, HttpRequest } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { appError } from "../../kernel/errors.js";
import { consumerOf, kClientAddress, requestIdOf } from "../../kernel/principal.js";
import type { FunctionRuntime, HttpCall } from "./function-runtime.js";
import { functionHeaders, parseBody, rawBodyOf, type FunctionRequest } from "./http-request.js";
import { withSandboxCsp, type ShapedResponse } from "./response-shaping.js";

const METHODS = new Set(["GET", "POST", "PUT", "PATCH", "DELETE"]);

export function createFunctionInvokeServiceImpl(deps: { runtime: FunctionRuntime; sandboxCsp?: boolean }): ServiceImpl<typeof FunctionService> {
  const { runtime } = deps;

  /** The parts every HTTP trigger call needs: method, slug, the raw call and the req builder. */
  function prepare(req: HttpRequest, ctx: HandlerContext) {
    const requestId = requestIdOf(ctx) || randomUUID();
    const method = req.method.toUpperCase() || "POST";
    if (!METHODS.has(method)) throw appError("method_not_allowed");
    const slug = req.pathParams["slug"] ?? "";
    const headers = functionHeaders(req.headers);
    const call: HttpCall = { headers, body: req.body, clientAddress: ctx.values.get(kClientAddress) };
    // Synchronous unless the body is multipart (parseBody): no promise per call.
    const buildReq = (): FunctionRequest | Promise<FunctionRequest> => {
      const body = parseBody(req.body, req.contentType || headerValue(headers, "content-type"));
      if (body instanceof Promise) return body.then((b) => functionRequest(method, slug, req, headers, b));
      return functionRequest(method, slug, req, headers, body);
    };
    return { requestId, slug, call, buildReq };
  }
  // A plain object: Connect makes the message when it answers a Connect call,
  // the REST gateway's passthrough reads the fields as they are.
  // Every HTTP trigger answer is sandboxed unless the operator turned it off (response-shaping.ts).
  const sandbox = deps.sandboxCsp !== false;
  const respond = (res: ShapedResponse): MessageInitShape<typeof HttpResponseSchema> => {
    if (sandbox) withSandboxCsp(res.headers);
    return { status: res.status, headers: res.headers, body: res.body };
  };

  return {
    // Without a promise when the runtime answers at once (the warm path, function-runtime.ts).
    invoke(req, ctx) {
      const consumer = consumerOf(ctx);
      const p = prepare(req, ctx);
      const res = runtime.invokeHttp(consumer, p.slug, p.buildReq, p.requestId, p.call);
      return res instanceof Promise ? res.then(respond) : respond(res);
    },

    async invokePublic(req, ctx) {
      const p = prepare(req, ctx);
      return respond(await runtime.invokePublic(req.pathParams["app_key"] ?? "", p.slug, p.buildReq, p.requestId, p.call));
    },
  };
}

function functionRequest(method: string, slug: string, req: HttpRequest, headers: Record<string, string>, body: unknown): FunctionRequest {
  const raw = rawBodyOf(req.body);
  return { method, slug, query: { ...req.query }, headers, body, rawBody: raw.rawBody, rawBodyEncoding: raw.rawBodyEncoding };
}

/** A header of the lower-cased header map (functionHeaders): one lookup instead of a scan. */
function headerValue(headers: Record<string, string>, name: string): string {
  return headers[name] ?? "";
}
