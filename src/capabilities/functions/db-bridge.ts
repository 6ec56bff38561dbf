// The host side of a function's `db` object: checks what came out of the
// isolate (plain copied data, but untrusted) and calls FunctionDb for the
// function's own application only. Never rejects: failures go back as
// { ok: false, code, message } and the isolate turns them into an Error with
// `code`. Each call carries its run's signal down to the database, so what
// an ended run left waiting or running is cancelled (issue 15 point 1).
import { errorDetail } from "../../kernel/errors.js";
import type { DbBridge } from "../../infra/sandbox/function-isolate.js";
import type { FunctionDb, FunctionDbParams, FunctionDbStatement } from "./function-db.js";

const MAX_SQL_CHARS = 100_000;
const MAX_STATEMENTS = 100;

type Reply = { ok: true; results: unknown } | { ok: false; code: string; message: string };

export function createDbBridge(db: FunctionDb, appId: number): DbBridge {
  return async (op, a, b, run): Promise<Reply> => {
    try {
      if (op === "query") {
        return { ok: true, results: await db.query(appId, checkSql(a, "sql"), checkParams(b, "params"), { signal: run.signal }) };
      }
      if (op === "batch") {
        if (!Array.isArray(a) || a.length === 0) return bad("statements must be a non-empty array");
        if (a.length > MAX_STATEMENTS) return bad(`at most ${MAX_STATEMENTS} statements in a batch`);
        const statements: FunctionDbStatement[] = a.map((s: unknown, i) => {
          if (s === null || typeof s !== "object") throw new BadCall(`statements.${i} must be an object { sql, params }`);
          const st = s as { sql?: unknown; params?: unknown };
          const params = checkParams(st.params ?? null, `statements.${i}.params`);
          return params === undefined ? { sql: checkSql(st.sql, `statements.${i}.sql`) } : { sql: checkSql(st.sql, `statements.${i}.sql`), params };
        });
        return { ok: true, results: await db.batch(appId, statements, { transaction: b === true, signal: run.signal }) };
      }
      return bad("unknown db operation");
    } catch (err) {
      if (err instanceof BadCall) return bad(err.message);
      const d = errorDetail(err);
      if (d) {
        const fields = d.fieldViolations.map((v) => `${v.field}: ${v.messages.join(", ")}`).join("; ");
        return { ok: false, code: d.code, message: (err as Error).message + (fields && !(err as Error).message.includes(fields) ? ` (${fields})` : "") };
      }
      return { ok: false, code: "query_error", message: "The database backend failed." };
    }
  };
}

class BadCall extends Error {}

function bad(message: string): Reply {
  return { ok: false, code: "validation_failed", message };
}

function checkSql(v: unknown, field: string): string {
  if (typeof v !== "string" || v.trim() === "") throw new BadCall(`${field} must be a non-empty string`);
  if (v.length > MAX_SQL_CHARS) throw new BadCall(`${field} is longer than ${MAX_SQL_CHARS} characters`);
  return v;
}

function checkParams(v: unknown, field: string): FunctionDbParams | undefined {
  if (v === null || v === undefined) return undefined;
  if (Array.isArray(v)) return v;
  if (typeof v === "object") return v as Record<string, unknown>;
  throw new BadCall(`${field} must be an array or an object`);
}
