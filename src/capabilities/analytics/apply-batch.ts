// Applies queued batches. One transaction takes one or several batches (a
// worker coalesces what it has in hand): the processed-batch records are
// inserted first, so a redelivered (or replayed, or re-published) batch finds
// its record and changes nothing; the effects of every fresh batch commit
// together with their records. A batch is never split across transactions.
import { storageFailure, type Sql } from "../../infra/storage/sql.js";
import { backoffMs, sleep } from "../../kernel/retry.js";
import { applyBreadcrumbs, applyEvents, applyLogs, stamp, type Stamped } from "./analytics-store.js";
import type { BatchPayload, BreadcrumbRow, EventRow, LogRow } from "./batch-payload.js";

export type ApplyOutcome = "applied" | "duplicate";

export async function applyBatch(sql: Sql, p: BatchPayload): Promise<ApplyOutcome> {
  return (await applyBatches(sql, [p]))[0]!;
}

/** Applies every batch in ONE transaction; outcomes in input order. */
export async function applyBatches(sql: Sql, batches: BatchPayload[]): Promise<ApplyOutcome[]> {
  return withTxRetry(() =>
    sql.transaction(async (tx) => {
      const { rows } = await tx.query<{ batch_id: string }>(
        `INSERT INTO analytics_processed_batches (batch_id, kind, item_count)
         SELECT * FROM unnest($1::text[], $2::text[], $3::int[])
         ON CONFLICT (batch_id) DO NOTHING RETURNING batch_id`,
        [batches.map((b) => b.batchId), batches.map((b) => b.kind), batches.map((b) => b.items.length)],
      );
      const fresh = new Set(rows.map((r) => r.batch_id));
      const events: Array<Stamped<EventRow>> = [];
      const logs: Array<Stamped<LogRow>> = [];
      const crumbs: Array<Stamped<BreadcrumbRow>> = [];
      const seen = new Set<string>();
      for (const b of batches) {
        // The same batch twice in one group: apply it once.
        if (!fresh.has(b.batchId) || seen.has(b.batchId)) continue;
        seen.add(b.batchId);
        if (b.kind === "events") events.push(...stamp(b, b.items));
        else if (b.kind === "logs") logs.push(...stamp(b, b.items));
        else crumbs.push(...stamp(b, b.items));
      }
      await applyEvents(tx, events);
      await applyLogs(tx, logs);
      await applyBreadcrumbs(tx, crumbs);
      const applied = new Set<string>();
      return batches.map((b) => {
        if (!fresh.has(b.batchId) || applied.has(b.batchId)) return "duplicate";
        applied.add(b.batchId);
        return "applied";
      });
    }),
  );
}

/**
 * Retries a transaction that lost a deadlock or serialization race, or whose
 * connection was lost before COMMIT (the server rolled it back; a fresh
 * connection from the pool runs it again). A connection lost during COMMIT
 * is not retried here: its outcome is unknown (the queue redelivers a batch
 * and the processed-batch record makes that safe).
 */
export async function withTxRetry<T>(fn: () => Promise<T>, attempts = 4): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= attempts || storageFailure(err)?.kind !== "retry") throw err;
      await sleep(backoffMs({ baseBackoffMs: 10, maxBackoffMs: 40, jitter: 0.5 }, i));
    }
  }
}

/** Forgets processed-batch records and Idempotency-Key bodies older than the idempotency window. */
export async function pruneProcessedBatches(sql: Sql, olderThanMs: number): Promise<number> {
  const { rowCount } = await sql.query(
    "DELETE FROM analytics_processed_batches WHERE processed_at < now() - $1 * interval '1 millisecond'",
    [olderThanMs],
  );
  await sql.query("DELETE FROM analytics_idempotency_keys WHERE created_at < now() - $1 * interval '1 millisecond'", [olderThanMs]);
  return rowCount;
}

/**
 * Binds a keyed batch id to the digest of the body it first came with;
 * answers the digest it is bound to (the given one the first time). Two
 * statements, so that a key a concurrent request has just bound is read
 * once that request's insert committed.
 */
export async function claimIdempotencyKey(sql: Sql, batchId: string, bodyDigest: string): Promise<string> {
  const ins = await sql.query<{ body_digest: string }>(
    "INSERT INTO analytics_idempotency_keys (batch_id, body_digest) VALUES ($1, $2) ON CONFLICT (batch_id) DO NOTHING RETURNING body_digest",
    [batchId, bodyDigest],
  );
  if (ins.rows[0]) return ins.rows[0].body_digest;
  const { rows } = await sql.query<{ body_digest: string }>("SELECT body_digest FROM analytics_idempotency_keys WHERE batch_id = $1", [batchId]);
  return rows[0]?.body_digest ?? bodyDigest;
}
