// binding() keeps connect-es's type check (an implementation binds to its
// own service only) and types each method's paths by that method: a
// misnamed method or a codec of another message does not compile (each
// expected error below fails `npm run typecheck` if it ever compiles).
// Each bound method says whether it answers at once from its proto option.
import { describe, expect, it } from "vitest";
import { getOption, type DescService } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { decodeHttpRequest, encodeHttpResponse } from "../../gen/fastcodec/pulsebase/common/v1/options.js";
import { decodeQueryRequest, encodeQueryResponse } from "../../gen/fastcodec/pulsebase/platform/v1/database.js";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { ContentService } from "../../gen/pulsebase/cms/v1/content_pb.js";
import { answers_at_once } from "../../gen/pulsebase/common/v1/options_pb.js";
import { AnalyticsService } from "../../gen/pulsebase/platform/v1/analytics_pb.js";
import { ConsumerService } from "../../gen/pulsebase/platform/v1/consumer_pb.js";
import { DatabaseService } from "../../gen/pulsebase/platform/v1/database_pb.js";
import { FunctionService } from "../../gen/pulsebase/platform/v1/functions_pb.js";
import { SessionService } from "../../gen/pulsebase/platform/v1/session_pb.js";
import { binding, type RestFastPath, type RestJsonPath } from "../../src/kernel/module.js";

/** An implementation answering {} for every method (the types are not what this file checks at run time). */
function stub<S extends DescService>(service: S): ServiceImpl<S> {
  return Object.fromEntries(service.methods.map((m) => [m.localName, () => ({})])) as unknown as ServiceImpl<S>;
}

const device = stub(DatabaseService);
const admin = {} as ServiceImpl<typeof AdminDatabaseService>;
const json: RestJsonPath = () => undefined;
const rest: RestFastPath = () => undefined;

describe("binding", () => {
  it("builds one record per unary method from its descriptor and paths", () => {
    const b = binding(DatabaseService, device, { query: { json, decode: decodeQueryRequest, encode: encodeQueryResponse } });
    expect(b.service).toBe(DatabaseService);
    expect(b.impl).toBe(device);
    expect([...b.methods.keys()]).toEqual(["query", "batch"]);
    const q = b.methods.get("query")!;
    expect(q.desc).toBe(DatabaseService.method.query);
    expect(q.json).toBe(json);
    expect(q.decode).toBe(decodeQueryRequest);
    expect(q.encode).toBe(encodeQueryResponse);
    expect(q.rest).toBeUndefined();
    expect(b.methods.get("batch")!.json).toBeUndefined();
  });

  it("calls the implementation's method on the implementation", async () => {
    const impl = { ...stub(ConsumerService), createConsumer(this: unknown) { return { self: this === impl }; } } as unknown as ServiceImpl<typeof ConsumerService>;
    const call = binding(ConsumerService, impl).methods.get("createConsumer")!.call!;
    expect(await call({} as never, {} as never)).toEqual({ self: true });
  });

  it("does not compile with another service's implementation, a misnamed method or a codec of another message", () => {
    // @ts-expect-error the operator DatabaseService's implementation is not the device one's
    binding(DatabaseService, admin);
    // @ts-expect-error the device DatabaseService has no method "nope"
    binding(DatabaseService, device, { nope: { json } });
    // @ts-expect-error method names are the local (lowerCamel) names, not the proto ones
    binding(DatabaseService, device, { Query: { json } });
    // @ts-expect-error Batch reads a BatchRequest, not a QueryRequest
    binding(DatabaseService, device, { batch: { decode: decodeQueryRequest } });
    // @ts-expect-error Query answers a QueryResponse, not an HttpResponse
    binding(DatabaseService, device, { query: { encode: encodeHttpResponse } });
    // @ts-expect-error Invoke reads an HttpRequest, not a QueryRequest
    binding(FunctionService, stub(FunctionService), { invoke: { decode: decodeQueryRequest, encode: encodeHttpResponse } });
    // the right ones compile
    binding(FunctionService, stub(FunctionService), { invoke: { decode: decodeHttpRequest, encode: encodeHttpResponse } });
  });

  it("takes 'answers at once' from the method's proto option, and refuses a fast path on a method without it", () => {
    const services: DescService[] = [DatabaseService, ContentService, FunctionService, AnalyticsService, ConsumerService, SessionService, AdminDatabaseService];
    const declared: string[] = [];
    for (const s of services) {
      for (const m of binding(s, stub(s)).methods.values()) {
        expect(m.answersAtOnce).toBe(getOption(m.desc, answers_at_once));
        if (m.answersAtOnce) declared.push(`${s.name}.${m.desc.name}`);
      }
    }
    // The methods a service answers from memory (REST JSON or fast paths) or as a warm function (passthrough).
    expect(declared.sort()).toEqual([
      "ContentService.GetEntry", "ContentService.GetSchema", "ContentService.ListEntries", "ContentService.ListSchemas",
      "DatabaseService.Batch", "DatabaseService.Query",
      "FunctionService.Invoke", "FunctionService.InvokePublic",
    ]);
    expect(() => binding(ConsumerService, stub(ConsumerService), { createConsumer: { rest } })).toThrow(/answers_at_once/);
    expect(() => binding(ContentService, stub(ContentService), { getEntry: { rest } })).not.toThrow();
  });
});
