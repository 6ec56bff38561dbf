import { create, fromJson, toJson } from "@bufbuild/protobuf";
import { HttpRequestSchema } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { SessionSchema, BatchSessionsRequestSchema, EndSessionRequestSchema } from "../../../gen/pulsebase/platform/v1/session_pb.js";
import { ConsumerSchema } from "../../../gen/pulsebase/platform/v1/consumer_pb.js";
import { RecordLogRequestSchema, RecordEventRequestSchema } from "../../../gen/pulsebase/platform/v1/analytics_pb.js";
import { decodeRest, encodeRest } from "../../../src/transport/http/rest-json.js";
import { Violations } from "../../../src/kernel/errors.js";

describe("REST JSON encoding", () => {
  it("writes proto names, int64 as numbers, timestamps as ISO 8601 and rest_null fields as null", () => {
    const s = create(SessionSchema, { sessionId: 42n, consumerId: 7n, startedAt: timestampFromDate(new Date("2026-01-01T00:00:00Z")) });
    expect(encodeRest(SessionSchema, s)).toEqual({ session_id: 42, consumer_id: 7, started_at: "2026-01-01T00:00:00.000Z", ended_at: null });
  });

  it("leaves out unset optional fields that are not rest_null", () => {
    const c = create(ConsumerSchema, { id: 1n, appKey: "k" });
    const out = encodeRest(ConsumerSchema, c);
    expect(out).not.toHaveProperty("token");
    expect(out).not.toHaveProperty("updated_at");
    expect(out.user_email).toBeNull();
  });

  it("writes integers beyond 2^53 as strings", () => {
    const s = create(SessionSchema, { sessionId: 2n ** 60n });
    expect(encodeRest(SessionSchema, s).session_id).toBe("1152921504606846976");
  });
});

describe("REST JSON decoding", () => {
  it("accepts session_id as a number or a numeric string", () => {
    for (const v of [12, "12"]) {
      const viol = new Violations();
      const m = decodeRest(EndSessionRequestSchema, { session_id: v }, viol) as unknown as { sessionId: bigint };
      expect(viol.empty).toBe(true);
      expect(m.sessionId).toBe(12n);
    }
  });

  it("reports unknown fields named like Object.prototype members instead of throwing", () => {
    const v = new Violations();
    decodeRest(EndSessionRequestSchema, JSON.parse('{"constructor":1,"toString":2,"__proto__":3,"hasOwnProperty":4}'), v);
    expect(Object.keys(v.fields).sort()).toEqual(["__proto__", "constructor", "hasOwnProperty", "toString"]);
  });

  it("decodes a map key named __proto__ as an own entry, as fromJson does, without touching the prototype", () => {
    const json = JSON.parse('{"method":"GET","headers":{"__proto__":"x","constructor":"y","a":"b"}}');
    const v = new Violations();
    const m = decodeRest(HttpRequestSchema, json, v) as unknown as { headers: Record<string, string> };
    expect(v.fields).toEqual({});
    const ref = fromJson(HttpRequestSchema, json);
    expect(Object.getPrototypeOf(m.headers)).toBe(Object.getPrototypeOf(ref.headers));
    expect(Object.keys(m.headers)).toEqual(Object.keys(ref.headers));
    expect(Object.getOwnPropertyDescriptor(m.headers, "__proto__")?.value).toBe("x");
    expect(encodeRest(HttpRequestSchema, m as never).headers).toEqual((toJson(HttpRequestSchema, ref) as { headers: unknown }).headers);
    expect(Object.keys(encodeRest(HttpRequestSchema, m as never).headers as object)).toContain("__proto__");
  });

  it("refuses a file part where a JSON object is expected (its bytes are not JSON)", () => {
    const file = { __file: true, filename: "a.txt", contentType: "text/plain", data: Buffer.from("hi") };
    const v = new Violations();
    decodeRest(RecordLogRequestSchema, { app_version: "1", context: file }, v);
    expect(Object.keys(v.fields)).toEqual(["context"]);
    const v2 = new Violations();
    decodeRest(RecordLogRequestSchema, { context: { a: { b: file } } }, v2);
    expect(Object.keys(v2.fields)).toEqual(["context"]);
    const v3 = new Violations();
    decodeRest(RecordEventRequestSchema, { name: "n", metadata: { k: file } }, v3);
    expect(Object.keys(v3.fields)).toEqual(["metadata"]);
  });

  it("names wrong types and unknown fields with dotted paths", () => {
    const v = new Violations();
    decodeRest(BatchSessionsRequestSchema, { sessions: [{ started_at: "x", ended_at: 5 }, { started_at: [], oops: 1 }], extra: true }, v);
    expect(Object.keys(v.fields).sort()).toEqual(["extra", "sessions.1.oops", "sessions.1.started_at"]);
    const v2 = new Violations();
    decodeRest(EndSessionRequestSchema, { session_id: 1.5 }, v2);
    expect(v2.fields).toEqual({ session_id: ["The session_id field must be an integer."] });
    const v3 = new Violations();
    decodeRest(BatchSessionsRequestSchema, { sessions: "nope" }, v3);
    expect(v3.fields).toEqual({ sessions: ["The sessions field must be an array."] });
  });
});
