// The analytics batch workers: consume the queue with bounded concurrency and
// apply each batch in one transaction (see apply-batch.ts). Batches in hand
// at the same moment are coalesced into one transaction (up to
// maxBatchesPerTransaction): the hot aggregate rows are then locked and the
// commit paid once per group instead of once per batch. A failing group is
// retried batch by batch, so one bad batch never holds back the others. Runs inside the
// server process by default, or alone in `worker` processes; any number of
// processes share one queue. Outcomes: success acks; a payload that can never
// be applied (unknown version, data the database refuses) is dead-lettered at
// once; anything else (database down, deadlock) is retried with backoff and
// dead-lettered after the queue's maxAttempts.
import { applyBatches, pruneProcessedBatches, type ApplyOutcome } from "./apply-batch.js";
import { decodePayload, type BatchPayload } from "./batch-payload.js";
import { storageFailure, type Sql } from "../../infra/storage/sql.js";
import { PermanentError, type Queue, type QueueMessage } from "../../infra/queue/queue.js";

export interface WorkerLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface WorkerDeps {
  sql: Sql;
  queue: Queue;
  /** Batches in flight in this process (default 32). */
  concurrency?: number;
  /** Batches applied together in one transaction (default 16). */
  maxBatchesPerTransaction?: number;
  /** Transactions running at once in this process (default 2). */
  transactions?: number;
  /** Idempotency window: processed-batch records older than this are pruned (default 24 h). */
  processedRetentionMs?: number;
  logger?: WorkerLogger;
  /** Called after each applied batch (tests, metrics). */
  onApplied?: (p: BatchPayload, outcome: ApplyOutcome) => void;
}

export interface Workers {
  /** Stops taking batches and waits for those in flight. */
  stop(): Promise<void>;
}

export const DEFAULT_PROCESSED_RETENTION_MS = 24 * 60 * 60_000;

interface Pending {
  payload: BatchPayload;
  attempt: number;
  resolve(): void;
  reject(err: unknown): void;
}

export function startWorkers(deps: WorkerDeps): Workers {
  const retention = deps.processedRetentionMs ?? DEFAULT_PROCESSED_RETENTION_MS;
  const maxGroup = Math.max(1, deps.maxBatchesPerTransaction ?? 16);
  const maxTx = Math.max(1, deps.transactions ?? 2);
  const pending: Pending[] = [];
  let running = 0;
  let scheduled = false;

  const classify = (err: unknown, p: Pending): unknown => {
    // Data exceptions and integrity violations fail the same way every time.
    const failure = storageFailure(err);
    if (failure?.kind === "refused") {
      return new PermanentError(`batch refused by the database (${failure.code}): ${(err as Error).message}`);
    }
    deps.logger?.warn({ err, batchId: p.payload.batchId, attempt: p.attempt }, "analytics batch failed, will retry");
    return err;
  };

  const settle = (group: Pending[], outcomes: ApplyOutcome[]) => {
    group.forEach((p, i) => {
      deps.onApplied?.(p.payload, outcomes[i]!);
      p.resolve();
    });
  };

  const run = async (group: Pending[]) => {
    running++;
    try {
      settle(group, await applyBatches(deps.sql, group.map((p) => p.payload)));
    } catch (err) {
      if (group.length === 1) group[0]!.reject(classify(err, group[0]!));
      else {
        for (const p of group) {
          try {
            settle([p], await applyBatches(deps.sql, [p.payload]));
          } catch (e) {
            p.reject(classify(e, p));
          }
        }
      }
    } finally {
      running--;
      flush();
    }
  };

  // Starts transactions while there is work and a free slot; waits one
  // macrotask first so that messages arriving together form one group.
  function flush() {
    while (pending.length > 0 && running < maxTx) void run(pending.splice(0, maxGroup));
  }
  const schedule = () => {
    if (pending.length >= maxGroup) flush();
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      flush();
    });
  };

  const handle = (msg: QueueMessage) =>
    new Promise<void>((resolve, reject) => {
      let payload: BatchPayload;
      try {
        payload = decodePayload(msg.data);
      } catch (err) {
        reject(new PermanentError(`undecodable batch: ${(err as Error).message}`));
        return;
      }
      pending.push({ payload, attempt: msg.attempt, resolve, reject });
      schedule();
    });

  const consumer = deps.queue.consume(handle, { concurrency: deps.concurrency ?? 32 });
  const prune = setInterval(() => {
    pruneProcessedBatches(deps.sql, retention).catch(() => {});
  }, Math.min(retention, 60 * 60_000));
  prune.unref();

  return {
    async stop() {
      clearInterval(prune);
      await consumer.stop();
    },
  };
}
