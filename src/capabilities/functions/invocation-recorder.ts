// Records invocations. HTTP and event invocations are buffered and written
// in one multi-row INSERT per flush (every `flushMs` or `maxBatch` records),
// so the hot path never waits for the database; manual runs are written at
// once because the operator gets the invocation id back. The buffer is
// bounded: past `maxBuffered` the oldest records are dropped (counted).
import type { Sql } from "../../infra/storage/sql.js";
import type { LogLine } from "../../infra/sandbox/types.js";

export interface InvocationRecord {
  appId: number;
  functionId: number;
  version: number | null;
  triggerKind: "http" | "event" | "manual" | "schedule";
  triggerId: number | null;
  status: number;
  outcome: string;
  durationMs: number;
  memoryBytes: number;
  error: string | null;
  /** The error's parts (function-runtime.ts errorDetailOf); unset: none. */
  errorName?: string;
  errorMessage?: string;
  errorStack?: string;
  logs: LogLine[];
  logsTruncated: boolean;
  requestId: string;
}

export interface RecorderOptions {
  flushMs: number;
  maxBatch: number;
  maxBuffered: number;
  /** Invocation records older than this are deleted (checked at most hourly, after a flush); 0 keeps them. */
  retentionDays: number;
  onError?: (err: unknown) => void;
}

export const DEFAULT_RECORDER_OPTIONS: RecorderOptions = { flushMs: 200, maxBatch: 500, maxBuffered: 20_000, retentionDays: 30 };

const PRUNE_EVERY_MS = 3600_000;

// Ids grow with time: find the first record inside the retention window by
// walking the primary key, then delete the range below it (no index on created_at).
const PRUNE_SQL = `
DELETE FROM function_invocations WHERE id < COALESCE(
  (SELECT id FROM function_invocations WHERE created_at >= now() - make_interval(days => $1::int) ORDER BY id LIMIT 1),
  (SELECT max(id) + 1 FROM function_invocations))`;

export interface InvocationRecorder {
  record(rec: InvocationRecord): void;
  recordNow(rec: InvocationRecord): Promise<number>;
  flush(): Promise<void>;
  /** Records dropped because the buffer was full. */
  readonly dropped: number;
  close(): Promise<void>;
}

// Rows travel as one JSON array (same SQL on PostgreSQL and PGlite; json_to_recordset
// parses twice as fast as the jsonb form on PGlite); rows of
// a function deleted meanwhile are skipped instead of failing the batch; ids
// follow the order of the records (the semi-join may reorder rows otherwise).
const INSERT_SQL = `
INSERT INTO function_invocations (app_id, function_id, version, trigger_kind, trigger_id, status, outcome,
  duration_ms, memory_bytes, error, error_name, error_message, error_stack, logs, logs_truncated, request_id)
SELECT r.app_id, r.function_id, r.version, r.trigger_kind, r.trigger_id, r.status, r.outcome,
  r.duration_ms, r.memory_bytes, r.error, NULLIF(r.error_name, ''), NULLIF(r.error_message, ''), NULLIF(r.error_stack, ''),
  COALESCE(r.logs, '[]'::jsonb), r.logs_truncated, r.request_id
FROM json_to_recordset($1::json) AS r(i int, app_id bigint, function_id bigint, version int, trigger_kind text,
  trigger_id bigint, status int, outcome text, duration_ms float8, memory_bytes bigint, error text, error_name text,
  error_message text, error_stack text, logs jsonb, logs_truncated boolean, request_id text)
WHERE EXISTS (SELECT 1 FROM functions f WHERE f.id = r.function_id)
ORDER BY r.i`;
/** A manual run's record: the operator gets its id back. Batches ask for none (no 500 rows to read back per flush). */
const INSERT_ONE_SQL = `${INSERT_SQL}
RETURNING id`;

function row(r: InvocationRecord, i: number) {
  return {
    i,
    app_id: r.appId,
    function_id: r.functionId,
    version: r.version,
    trigger_kind: r.triggerKind,
    trigger_id: r.triggerId,
    status: r.status,
    outcome: r.outcome,
    duration_ms: r.durationMs,
    memory_bytes: r.memoryBytes,
    error: r.error,
    error_name: r.errorName ?? "",
    error_message: r.errorMessage ?? "",
    error_stack: r.errorStack ?? "",
    logs: r.logs,
    logs_truncated: r.logsTruncated,
    request_id: r.requestId,
  };
}

export function createInvocationRecorder(sql: Sql, options: Partial<RecorderOptions> = {}): InvocationRecorder {
  const opts = { ...DEFAULT_RECORDER_OPTIONS, ...options };
  let buffer: InvocationRecord[] = [];
  let dropped = 0;
  let inFlight: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  let prunedAt = 0;

  const write = async (batch: InvocationRecord[]) => {
    if (batch.length === 0) return;
    try {
      await sql.query(INSERT_SQL, [JSON.stringify(batch.map(row))]);
    } catch (err) {
      opts.onError?.(err);
    }
  };
  const flush = (): Promise<void> => {
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    const batch = buffer;
    buffer = [];
    // Chained so flushes stay ordered and a flush() waits for earlier ones.
    inFlight = inFlight.then(async () => {
      for (let i = 0; i < batch.length; i += opts.maxBatch) await write(batch.slice(i, i + opts.maxBatch));
      if (opts.retentionDays > 0 && batch.length > 0 && Date.now() - prunedAt > PRUNE_EVERY_MS) {
        prunedAt = Date.now();
        await sql.query(PRUNE_SQL, [opts.retentionDays]).catch(opts.onError ?? (() => {}));
      }
    });
    return inFlight;
  };

  return {
    record(rec) {
      buffer.push(rec);
      if (buffer.length > opts.maxBuffered) {
        buffer.shift();
        dropped++;
      }
      if (buffer.length >= opts.maxBatch) void flush();
      else if (!timer) {
        timer = setTimeout(() => void flush(), opts.flushMs);
        timer.unref();
      }
    },
    async recordNow(rec) {
      const r = await sql.query<{ id: number }>(INSERT_ONE_SQL, [JSON.stringify([row(rec, 0)])]);
      return r.rows[0]?.id ?? 0;
    },
    flush,
    get dropped() {
      return dropped;
    },
    close: flush,
  };
}
