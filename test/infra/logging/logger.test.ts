// How errors appear in log lines: type, message, code, stack and the cause
// chain, never a ConnectError's protobuf descriptors or metadata.
import { Writable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { serializeError, withErrorSerializers } from "../../../src/infra/logging/logger.js";
import { appError, validationError } from "../../../src/kernel/errors.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;

function capture() {
  const out: string[] = [];
  const stream = new Writable({
    write(c: Buffer, _e, done) {
      out.push(...c.toString().split("\n").filter(Boolean));
      done();
    },
  });
  return { logger: withErrorSerializers(pino({ level: "info" }, stream)), out };
}

function driverError(): Error {
  return Object.assign(new Error('duplicate key value violates unique constraint "users_email_key"'), {
    code: "23505",
    severity: "ERROR",
    constraint: "users_email_key",
    table: "users",
    // objects on a driver error are dropped
    client: { secret: "x" },
  });
}

describe("error serializer", () => {
  it("writes a domain error with its catalogue code, stack and the driver error as cause", () => {
    const err = appError("internal_error", undefined, { cause: driverError() });
    const s = serializeError(err) as Json;
    expect(s).toMatchObject({ type: "ConnectError", message: "Internal error.", code: "Internal", appCode: "internal_error" });
    expect(s.stack).toContain("appError");
    expect(s.cause).toMatchObject({ type: "Error", code: "23505", constraint: "users_email_key", table: "users", severity: "ERROR" });
    expect(s.cause.stack).toContain("driverError");
    expect(s.cause).not.toHaveProperty("client");
    expect(s).not.toHaveProperty("details");
    expect(s).not.toHaveProperty("metadata");
  });

  it("keeps protobuf descriptors out of the log line (they were 2 KB per line)", () => {
    const { logger, out } = capture();
    const err = validationError({ "events.0.name": ["The name is required."] });
    logger.error({ err }, "failed");
    logger.error(new ConnectError("boom", Code.Internal, { "x-a": "1" }, [], appError("unavailable")));
    expect(out).toHaveLength(2);
    for (const line of out) {
      expect(line).not.toContain('"desc"');
      expect(line).not.toContain("typeName");
      expect(line.length).toBeLessThan(3000);
    }
    const first = JSON.parse(out[0]!);
    expect(first.err).toMatchObject({ type: "ConnectError", code: "InvalidArgument", appCode: "validation_failed", message: "The name is required." });
    const second = JSON.parse(out[1]!);
    expect(second.err).toMatchObject({ message: "boom", code: "Internal", cause: { appCode: "unavailable" } });
  });

  it("follows causes only so deep, survives cycles and non-Error throwables", () => {
    const a = new Error("a") as Error & { cause?: unknown };
    const b = new Error("b", { cause: a });
    a.cause = b;
    const s = serializeError(b) as Json;
    expect(s.cause.message).toBe("a");
    expect(s.cause.cause).toBe("[circular]");
    expect(serializeError("plain text")).toBe("plain text");
    expect(serializeError({ code: "X", detail: { deep: 1 } })).toEqual({ code: "X" });
    let deep: Error = new Error("0");
    for (let i = 1; i < 20; i++) deep = new Error(String(i), { cause: deep });
    expect(JSON.stringify(serializeError(deep))).toContain("[truncated]");
  });
});
