// The error catalogue is the one status table: every entry's REST status and
// Connect code, the Connect HTTP status derived from the code by connect-es,
// the reading of a ConnectError without a detail, and the CMS envelope's
// codes for platform codes. (Over the wire, per protocol:
// test/transport/rpc/error-catalogue.test.ts.)
import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus } from "@connectrpc/connect/protocol-connect";
import { describe, expect, it } from "vitest";
import {
  appError,
  catalogue,
  cmsCodeFor,
  codeFallback,
  connectHttpStatus,
  errorDetail,
  restStatusOf,
  toAppError,
  type CatalogueEntry,
  type ErrorCode,
} from "../../src/kernel/errors.js";

const entries = Object.entries(catalogue) as [ErrorCode, CatalogueEntry][];
const codes = Object.values(Code).filter((c): c is Code => typeof c === "number");

describe("the error catalogue", () => {
  it.each(entries)("%s: appError carries the entry's Connect code and its REST status in the detail", (name, e) => {
    const err = appError(name);
    expect(err.code).toBe(e.code);
    expect(err.rawMessage).toBe(e.message);
    expect(errorDetail(err)).toMatchObject({ code: name, httpStatus: e.rest });
    expect(restStatusOf(err)).toBe(e.rest);
    expect(toAppError(err)).toBe(err);
    expect(e.rest).toBeGreaterThanOrEqual(400);
    expect(e.rest).toBeLessThan(600);
  });

  it("derives the Connect HTTP status from connect-es's own table, for every code", () => {
    for (const c of codes) expect(connectHttpStatus(c)).toBe(codeToHttpStatus(c));
  });

  it("settles failed_precondition: REST 409 (a conflict with the resource's state), Connect 400, gRPC 9", () => {
    expect(catalogue.failed_precondition).toMatchObject({ code: Code.FailedPrecondition, rest: 409 });
    expect(connectHttpStatus(Code.FailedPrecondition)).toBe(400);
    expect(Code.FailedPrecondition).toBe(9);
    // A FailedPrecondition without a detail is the same entry (no 412 anywhere).
    const bare = new ConnectError("the session has ended", Code.FailedPrecondition);
    expect(restStatusOf(bare)).toBe(409);
    expect(errorDetail(toAppError(bare))).toMatchObject({ code: "failed_precondition", httpStatus: 409 });
  });

  it.each(codes.map((c) => [Code[c], c] as const))("reads a %s ConnectError without a detail as the entry that carries its code (or internal_error)", (_n, c) => {
    const fallback = codeFallback[c];
    expect(fallback === "internal_error" || catalogue[fallback].code === c).toBe(true);
    const bare = new ConnectError("from a library", c);
    const e = toAppError(bare);
    expect(errorDetail(e)).toMatchObject({ code: fallback, httpStatus: catalogue[fallback].rest });
    expect(restStatusOf(bare)).toBe(catalogue[fallback].rest);
    expect(e.cause).toBe(bare);
    // The code a client reads is kept wherever an entry carries it.
    if (fallback !== "internal_error") expect(e.code).toBe(c);
  });

  it("reads anything else thrown as internal_error (500)", () => {
    expect(restStatusOf(new Error("x"))).toBe(500);
    expect(errorDetail(toAppError("x"))).toMatchObject({ code: "internal_error", httpStatus: 500 });
  });

  it("names the CMS envelope's code for a platform code from the catalogue: one CMS entry per status at most", () => {
    const fallbacks = entries.filter(([, e]) => e.cmsFallback);
    expect(fallbacks.every(([n]) => /^[A-Z_]+$/.test(n))).toBe(true);
    expect(new Set(fallbacks.map(([, e]) => e.rest)).size).toBe(fallbacks.length);
    for (const [n, e] of fallbacks) expect(cmsCodeFor(e.rest)).toBe(n);
    expect(cmsCodeFor(401)).toBe("UNAUTHENTICATED");
    expect(cmsCodeFor(404)).toBe("NOT_FOUND");
    expect(cmsCodeFor(409)).toBe("INVALID_PARAMETER");
    expect(cmsCodeFor(503)).toBe("INTERNAL_ERROR");
    expect(cmsCodeFor(504)).toBe("QUERY_TIMEOUT");
  });
});
