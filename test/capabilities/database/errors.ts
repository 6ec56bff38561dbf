import { errorDetail } from "../../../src/kernel/errors.js";

/** The catalogue code, HTTP status and field paths of a rejected call. */
export async function failure(p: Promise<unknown>): Promise<{ code: string; http: number; fields: Record<string, string[]>; message: string }> {
  try {
    await p;
  } catch (e) {
    const d = errorDetail(e);
    if (!d) throw e;
    return {
      code: d.code,
      http: d.httpStatus,
      fields: Object.fromEntries(d.fieldViolations.map((f) => [f.field, f.messages])),
      message: (e as Error).message,
    };
  }
  throw new Error("expected the call to fail");
}
