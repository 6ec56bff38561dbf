import { describe, expect, it } from "vitest";
import { ConsumerService } from "../../../gen/pulsebase/platform/v1/consumer_pb.js";
import { SessionService } from "../../../gen/pulsebase/platform/v1/session_pb.js";
import { parseTemplate, RouteTable } from "../../../src/transport/http/route-table.js";

describe("route table from google.api.http", () => {
  it("derives every documented consumer and session route", () => {
    const t = new RouteTable();
    t.addService(ConsumerService);
    t.addService(SessionService);
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

  it("refuses a service whose routes are already taken", () => {
    const t = new RouteTable();
    t.addService(SessionService);
    expect(() => t.addService(SessionService)).toThrow(/duplicate REST route POST \/api\/session\/start/);
  });

  it("treats routes that differ only in variable names as duplicates", () => {
    expect(parseTemplate("/a/{x}/b").shape).toBe(parseTemplate("/a/{y}/b").shape);
    expect(() => parseTemplate("/a/{x=**}")).toThrow(/unsupported route segment/);
    expect(() => parseTemplate("/a/{x}/{x}")).toThrow(/duplicate path variable/);
  });
});
