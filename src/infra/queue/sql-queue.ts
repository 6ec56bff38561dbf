// BatchQueue over the analytics_queue table (the embedded default, no NATS).
// Claiming uses FOR UPDATE SKIP LOCKED so several workers (or processes on a
// shared PostgreSQL) never take the same row; a claim hides the row for
// visibilityMs, so a worker that dies mid-batch releases it by timeout.
// Acknowledged rows are deleted; the processed-batch record keeps a later
// duplicate publish from being applied twice.
import { appError } from "../../kernel/errors.js";
import type { Sql } from "../storage/sql.js";
import {
  backoffMs,
  defaultRetryPolicy,
  errorText,
  isTransient,
  PermanentError,
  Semaphore,
  type BatchQueue,
  type DeadLetterEntry,
  type MessageHandler,
  type QueueConsumer,
  type RetryPolicy,
} from "./queue.js";

export interface SqlQueueOptions {
  sql: Sql;
  retry?: Partial<RetryPolicy>;
  /** How long a claimed message stays hidden before another worker may take it. */
  visibilityMs?: number;
  /** Poll interval when idle (other processes' publishes are seen this late at most). */
  pollMs?: number;
  /** Largest payload accepted (default 8 MiB). */
  maxMessageBytes?: number;
}

interface ClaimedRow {
  id: number;
  msg_id: string;
  payload: Uint8Array;
  attempts: number;
}

export function createSqlQueue(opts: SqlQueueOptions): BatchQueue {
  const { sql } = opts;
  const policy: RetryPolicy = { ...defaultRetryPolicy, ...opts.retry };
  const visibilityMs = opts.visibilityMs ?? 60_000;
  const pollMs = opts.pollMs ?? 250;
  // Publishes in this process wake the local consumers at once.
  const wakers = new Set<() => void>();
  const wake = () => {
    for (const w of wakers) w();
  };

  return {
    backend: "embedded",
    maxMessageBytes: opts.maxMessageBytes ?? 8 * 1024 * 1024,

    async publish(msgId, data) {
      let rows: unknown[];
      try {
        ({ rows } = await sql.query(
          "INSERT INTO analytics_queue (msg_id, payload) VALUES ($1, $2) ON CONFLICT (msg_id) DO NOTHING RETURNING id",
          [msgId, Buffer.from(data.buffer, data.byteOffset, data.byteLength)],
        ));
      } catch (err) {
        throw appError("unavailable", "The ingestion queue is unavailable.", { cause: err, retryAfterSeconds: 1 });
      }
      wake();
      return { duplicate: rows.length === 0 };
    },

    consume(handler: MessageHandler, { concurrency }): QueueConsumer {
      let stopped = false;
      const sem = new Semaphore(concurrency);
      let wakeUp: (() => void) | undefined;
      const waker = () => wakeUp?.();
      wakers.add(waker);

      const settle = async (row: ClaimedRow, err: unknown) => {
        if (err === undefined) {
          await sql.query("DELETE FROM analytics_queue WHERE id = $1", [row.id]);
        } else if (err instanceof PermanentError || (row.attempts >= policy.maxAttempts && !isTransient(err))) {
          await sql.query(
            "UPDATE analytics_queue SET status = 'dead', dead_at = now(), last_error = $2 WHERE id = $1",
            [row.id, errorText(err)],
          );
        } else {
          await sql.query(
            "UPDATE analytics_queue SET visible_at = now() + $2 * interval '1 millisecond', last_error = $3 WHERE id = $1",
            [row.id, backoffMs(policy, row.attempts), errorText(err)],
          );
        }
      };

      const loop = (async () => {
        while (!stopped) {
          const free = concurrency - sem.inUse;
          let rows: ClaimedRow[] = [];
          if (free > 0) {
            try {
              ({ rows } = await sql.query<ClaimedRow>(
                `UPDATE analytics_queue q SET attempts = q.attempts + 1,
                   visible_at = now() + $2 * interval '1 millisecond'
                 FROM (SELECT id FROM analytics_queue
                       WHERE status = 'ready' AND visible_at <= now()
                       ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED) c
                 WHERE q.id = c.id
                 RETURNING q.id, q.msg_id, q.payload, q.attempts`,
                [free, visibilityMs],
              ));
            } catch {
              rows = []; // database briefly unavailable: poll again later
            }
          }
          for (const row of rows) {
            await sem.acquire();
            void (async () => {
              let failure: unknown;
              try {
                await handler({ id: row.msg_id, data: new Uint8Array(row.payload), attempt: row.attempts });
              } catch (err) {
                failure = err ?? new Error("failed");
              }
              try {
                await settle(row, failure);
              } catch {
                // The claim expires after visibilityMs and the row is retried.
              } finally {
                sem.release();
                waker();
              }
            })();
          }
          if (rows.length === 0 || sem.inUse >= concurrency) {
            await new Promise<void>((resolve) => {
              const t = setTimeout(resolve, rows.length === 0 ? pollMs : 50);
              wakeUp = () => {
                clearTimeout(t);
                resolve();
              };
            });
            wakeUp = undefined;
          }
        }
      })();

      return {
        async stop() {
          stopped = true;
          waker();
          wakers.delete(waker);
          await loop;
          await sem.idle();
        },
      };
    },

    async stats() {
      const { rows } = await sql.query<{ lag: number; in_flight: number; dead: number }>(
        `SELECT count(*) FILTER (WHERE status = 'ready') AS lag,
                count(*) FILTER (WHERE status = 'ready' AND attempts > 0 AND visible_at > now()) AS in_flight,
                count(*) FILTER (WHERE status = 'dead') AS dead
         FROM analytics_queue`,
      );
      const r = rows[0]!;
      return { backend: "embedded", lag: Number(r.lag), inFlight: Number(r.in_flight), deadLetters: Number(r.dead) };
    },

    async listDeadLetters(pageSize, pageToken) {
      const after = pageToken ? Number(pageToken) : 0;
      if (!Number.isSafeInteger(after) || after < 0) throw appError("validation_failed", "Invalid page_token.", { fields: { page_token: ["Invalid page token."] } });
      const { rows } = await sql.query<ClaimedRow & { last_error: string | null; dead_at: Date }>(
        `SELECT id, msg_id, payload, attempts, last_error, dead_at FROM analytics_queue
         WHERE status = 'dead' AND id > $1 ORDER BY id LIMIT $2`,
        [after, pageSize + 1],
      );
      const page = rows.slice(0, pageSize);
      const entries: DeadLetterEntry[] = page.map((r) => ({
        id: String(r.id),
        msgId: r.msg_id,
        data: new Uint8Array(r.payload),
        attempts: r.attempts,
        lastError: r.last_error ?? "",
        deadAt: new Date(r.dead_at),
      }));
      return { entries, nextPageToken: rows.length > pageSize ? String(page[page.length - 1]!.id) : "" };
    },

    async replayDeadLetters(ids) {
      const numeric = ids?.map(Number).filter((n) => Number.isSafeInteger(n));
      const { rowCount } = await sql.query(
        `UPDATE analytics_queue SET status = 'ready', attempts = 0, visible_at = now(), dead_at = NULL
         WHERE status = 'dead' AND ($1::bigint[] IS NULL OR id = ANY($1::bigint[]))`,
        [numeric ?? null],
      );
      wake();
      return rowCount;
    },

    async close() {
      wakers.clear();
    },
  };
}
