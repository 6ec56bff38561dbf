// pulsebase.platform.v1.FunctionService: the HTTP trigger /api/fn/{slug}
// (a passthrough method: raw request in, raw response out).
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import { FunctionService } from "../../gen/pulsebase/platform/v1/functions_pb.js";
import { HttpResponseSchema } from "../../gen/pulsebase/common/v1/options_pb.js";
import { appError } from "../internal/errors.js";
import { consumerOf, requestIdOf } from "../internal/principal.js";
import type { FunctionRuntime } from "./function-runtime.js";
import { functionHeaders, parseBody, type FunctionRequest } from "./http-request.js";

const METHODS = new Set(["GET", "POST", "PUT", "PATCH", "DELETE"]);

export function createFunctionInvokeServiceImpl(deps: { runtime: FunctionRuntime }): ServiceImpl<typeof FunctionService> {
  const { runtime } = deps;
  return {
    async invoke(req, ctx) {
      const consumer = consumerOf(ctx);
      const requestId = requestIdOf(ctx) || randomUUID();
      const method = req.method.toUpperCase() || "POST";
      if (!METHODS.has(method)) throw appError("method_not_allowed");
      const slug = req.pathParams["slug"] ?? "";
      const buildReq = async (): Promise<FunctionRequest> => ({
        method,
        slug,
        query: { ...req.query },
        headers: functionHeaders(req.headers),
        body: await parseBody(req.body, req.contentType || headerValue(req.headers, "content-type")),
      });
      const res = await runtime.invokeHttp(consumer, slug, buildReq, requestId);
      return create(HttpResponseSchema, { status: res.status, headers: res.headers, body: res.body });
    },
  };
}

function headerValue(headers: Record<string, string>, name: string): string {
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return v;
  return "";
}
