// Messages between the service and its engine processes (engine-process.ts).
// One JSON message per line over the pipe on fd 3: arguments are numbers, strings or null; result
// values are already encoded for the response (docs/database.md).
import type { AccessCaller, AccessRules } from "./access-rules.js";
import type { PointShape, PointVerdict } from "./point-plan.js";

export type EngineValue = number | string | null;

export interface EngineStatement {
  sql: string;
  args: EngineValue[];
  /** First word upper-cased (INSERT/UPDATE/DELETE with RETURNING count writes). */
  verb: string;
  /** Parameter names by index - 1 when the statement binds by name (sql-params.ts RemoteBinding). */
  names?: readonly string[];
}

export interface EngineRequest {
  type: "run";
  id: number;
  /** Absolute path of the database file. */
  path: string;
  statements: EngineStatement[];
  transaction: boolean;
  /** Drop the connection afterwards if temp objects were created. */
  mayUseTemp: boolean;
  maxRows: number;
  maxBytes: number;
  busyTimeoutMs: number;
  maxDatabaseBytes: number;
  /**
   * The service's own statements (change capture): run without the tenant
   * authorizer and the schema caps. Never set for a tenant's SQL.
   */
  service?: boolean;
  /**
   * The single statement has a point read's shape: after running it, the
   * engine decides whether the in-process reader may serve it
   * (point-plan.ts) and returns the verdict with the result.
   */
  classify?: PointShape;
  /**
   * A device of an application in `rules` mode: the statements run on a
   * connection of that application's own with its rules installed
   * (access-rules.ts). `key` names the application and the rules' version.
   */
  access?: EngineAccess;
  /** With `transaction`: roll it back at the end instead of committing (a preview). */
  rollback?: boolean;
  /**
   * Runs nothing: installs these rules on a scratch connection and answers
   * each table's error in one result's `ruleErrors` (the check made when
   * rules are saved).
   */
  checkRules?: AccessRules;
}

export interface EngineAccess {
  key: string;
  rules: AccessRules;
  caller: AccessCaller;
}

export interface EngineClose {
  type: "close";
  id: number;
  path: string;
}

/** Checkpoints and truncates the file's WAL (after an engine was killed while it may have been writing). */
export interface EngineCheckpoint {
  type: "checkpoint";
  id: number;
  path: string;
}

export type EngineMessage = EngineRequest | EngineClose | EngineCheckpoint;

export interface EngineResult {
  columns: string[];
  rows: EngineValue[][];
  rowsRead: number;
  rowsWritten: number;
  error?: string;
  /** The answer to EngineRequest.classify (on the single result). */
  verdict?: PointVerdict;
  /** EngineCheckRules: the errors found, by table (none: the rules install). */
  ruleErrors?: string[];
}

export type EngineReply =
  | { id: number; ok: true; results: EngineResult[] }
  | { id: number; ok: false; fatal: string };

/**
 * Per-process settings, passed once on the engine's command line as JSON
 * (database-config.ts documents each limit).
 */
export interface EngineSettings {
  /** SQLITE_LIMIT_LENGTH: the largest string or blob a statement may make or read. */
  maxValueBytes: number;
  /** PRAGMA journal_size_limit: the WAL is truncated to this size when it is reset. */
  walSizeLimitBytes: number;
  /** Schema caps checked after a tenant's CREATE or ALTER statement. */
  maxSchemaBytes: number;
  maxSchemaObjects: number;
  maxColumnsPerTable: number;
}

/**
 * Splits the channel's text into messages, one JSON per line (JSON.stringify
 * never writes a raw newline); a message cut across chunks waits for its end.
 */
export function lineSplitter(): (chunk: string) => string[] {
  // Pieces are joined once per message: a 16 MiB statement arriving in many
  // chunks is copied once, not once per chunk.
  let pending: string[] = [];
  return (chunk) => {
    const lines: string[] = [];
    let from = 0;
    for (let nl = chunk.indexOf("\n"); nl >= 0; nl = chunk.indexOf("\n", from)) {
      pending.push(chunk.slice(from, nl));
      lines.push(pending.join(""));
      pending = [];
      from = nl + 1;
    }
    if (from < chunk.length) pending.push(chunk.slice(from));
    return lines;
  };
}
