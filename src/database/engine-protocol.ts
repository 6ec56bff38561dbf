// Messages between the service and its engine processes (engine-process.ts).
// One JSON message per line over the pipe on fd 3: arguments are numbers, strings or null; result
// values are already encoded for the response (DECISIONS 18).
export type EngineValue = number | string | null;

export interface EngineStatement {
  sql: string;
  args: EngineValue[];
  /** First word upper-cased (INSERT/UPDATE/DELETE with RETURNING count writes). */
  verb: string;
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
}

export interface EngineClose {
  type: "close";
  id: number;
  path: string;
}

export type EngineMessage = EngineRequest | EngineClose;

export interface EngineResult {
  columns: string[];
  rows: EngineValue[][];
  rowsRead: number;
  rowsWritten: number;
  error?: string;
}

export type EngineReply =
  | { id: number; ok: true; results: EngineResult[] }
  | { id: number; ok: false; fatal: string };
