import { describe, expect, it } from "vitest";
import { ConsumerService } from "../../../gen/pulsebase/platform/v1/consumer_pb.js";
import { SessionService } from "../../../gen/pulsebase/platform/v1/session_pb.js";
import type { DescService } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { binding } from "../../../src/kernel/module.js";
import { parseTemplate, RouteTable } from "../../../src/transport/http/route-table.js";

/** A binding with no implementation: the routes come from the methods' records alone. */
const bare = <S extends DescService>(s: S) => binding(s, {} as ServiceImpl<S>);

describe("route table from google.api.http", () => {
  it("derives every documented consumer and session route", () => {
    const t = new RouteTable();
    t.addService(bare(ConsumerService));
    t.addService(bare(SessionService));
    expect(t.routes.map((r) => `${r.verb} ${r.template}`).sort()).toEqual([
      "GET /api/consumer/token",
      "PATCH /api/consumer/{id}",
      "POST /api/consumer",
      "POST /api/session/batch",
      "POST /api/session/end",
      "POST /api/session/start",
      "PUT /api/consumer/{id}",
    ]);
    const batch = t.routes.find((r) => r.template === "/api/session/batch")!;
    expect(batch.responseBody).toBe("sessions");
    expect(t.routes.find((r) => r.template === "/api/consumer/{id}")!.path).toBe("/api/consumer/:id");
  });

  it("takes each route from its method's record (httpRules)", () => {
    const b = bare(ConsumerService);
    expect(b.methods.get("issueToken")!.httpRules.map((r) => r.pattern)).toEqual([{ case: "get", value: "/api/consumer/token" }]);
    const t = new RouteTable();
    t.addService(b);
    expect(t.routes.find((r) => r.template === "/api/consumer/token")!.method).toBe(b.methods.get("issueToken")!.desc);
  });

  it("refuses a service whose routes are already taken", () => {
    const t = new RouteTable();
    t.addService(bare(SessionService));
    expect(() => t.addService(bare(SessionService))).toThrow(/duplicate REST route POST \/api\/session\/start/);
  });

  it("treats routes that differ only in variable names as duplicates", () => {
    expect(parseTemplate("/a/{x}/b").shape).toBe(parseTemplate("/a/{y}/b").shape);
    expect(() => parseTemplate("/a/{x=**}")).toThrow(/unsupported route segment/);
    expect(() => parseTemplate("/a/{x}/{x}")).toThrow(/duplicate path variable/);
  });
});
