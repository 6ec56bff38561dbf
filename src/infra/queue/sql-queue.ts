// The queue over the queue_messages and queue_dead_letters tables (the
// embedded default, no NATS), rows told apart by queue name. A claim hides a
// row until visible_at (ackWaitMs, extended by the progress marks), so a
// worker that dies releases it by timeout; a retry hides it for its backoff;
// an acknowledged row is deleted. Without lanes, claims use FOR UPDATE SKIP
// LOCKED so workers in any number of processes never take the same row.
// With lanes only a lane's oldest row can be claimed, under a per-lane
// advisory lock, so order per lane holds with several processes on one
// PostgreSQL.
import { appError } from "../../kernel/errors.js";
import {
  DEFAULT_ACK_WAIT_MS,
  deadKey,
  defaultRetryPolicy,
  numericIds,
  parsePageToken,
  progressEveryMs,
  runHandler,
  Semaphore,
  topicPattern,
  type Attrs,
  type DeadLetter,
  type DeadLetterFilter,
  type Queue,
  type QueueOptions,
} from "./queue.js";

interface Row {
  id: string | number;
  msg_id: string;
  topic: string;
  attrs: Attrs | string;
  payload: Uint8Array;
  attempts: number;
}

const COLUMNS = "id, msg_id, topic, attrs, payload, attempts";
const attrsOf = (a: Attrs | string): Attrs => (typeof a === "string" ? (JSON.parse(a) as Attrs) : a);
const bytes = (d: Uint8Array) => Buffer.from(d.buffer, d.byteOffset, d.byteLength);

export function createSqlQueue(opts: Omit<QueueOptions, "nats" | "jetstream">): Queue {
  const { sql, name } = opts;
  const policy = { ...defaultRetryPolicy, ...opts.retry };
  const ackWaitMs = opts.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
  const pollMs = opts.pollMs ?? 250;
  const lanes = opts.lanes?.count ?? 0;
  // Publishes in this process wake the local consumers at once.
  const wakers = new Set<() => void>();
  const published = new Set<number>();
  // Which lanes have anything to do, asked once per poll for all of them in
  // one query (an index probe per lane): an idle server then polls with
  // that, not a claim transaction per lane.
  let probe: { at: number; lanes: Promise<Set<number>> } | undefined;
  const busyLanes = () => {
    if (!probe || Date.now() - probe.at >= pollMs) {
      const found = sql
        .query<{ lane: number }>(
          `SELECT l AS lane FROM generate_series(0, $2::int - 1) AS l
           WHERE EXISTS (SELECT 1 FROM queue_messages WHERE queue = $1 AND lane = l)`,
          [name, lanes],
        )
        .then((r) => new Set(r.rows.map((x) => Number(x.lane))));
      probe = { at: Date.now(), lanes: found };
      found.catch(() => (probe = undefined));
    }
    return probe.lanes;
  };

  const claimAny = async (n: number): Promise<Row[]> =>
    (
      await sql.query<Row>(
        `UPDATE queue_messages q SET attempts = q.attempts + 1, visible_at = clock_timestamp() + $3 * interval '1 millisecond'
         FROM (SELECT id FROM queue_messages WHERE queue = $1 AND lane = 0 AND visible_at <= clock_timestamp()
               ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) c
         WHERE q.id = c.id
         RETURNING q.id, q.msg_id, q.topic, q.attrs, q.payload, q.attempts`,
        [name, n, ackWaitMs],
      )
    ).rows;

  const claimHead = async (lane: number): Promise<Row[]> => {
    if (!published.delete(lane) && !(await busyLanes()).has(lane)) return [];
    return sql.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock(hashtext($1), $2)", [name, lane]);
      const r = await tx.query<Row>(
        `UPDATE queue_messages SET attempts = attempts + 1, visible_at = clock_timestamp() + $3 * interval '1 millisecond'
         WHERE id = (SELECT id FROM queue_messages WHERE queue = $1 AND lane = $2 ORDER BY id LIMIT 1)
           AND visible_at <= clock_timestamp()
         RETURNING ${COLUMNS}`,
        [name, lane, ackWaitMs],
      );
      return r.rows;
    });
  };

  const filterSql = (f: DeadLetterFilter, from: number) => ({
    where: `queue = $1 AND ($${from}::text IS NULL OR topic ~ $${from}) AND attrs @> $${from + 1}::jsonb`,
    params: [f.topic === undefined ? null : topicPattern(f.topic).source, JSON.stringify(f.attrs ?? {})],
  });

  return {
    backend: "embedded",
    maxMessageBytes: 8 * 1024 * 1024,
    ready: async () => {},

    async publish(msgId, data, o = {}) {
      const lane = opts.lanes ? opts.lanes.of(data) : 0;
      let rows: unknown[];
      try {
        ({ rows } = await sql.query(
          "INSERT INTO queue_messages (queue, msg_id, lane, topic, payload) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (queue, msg_id) DO NOTHING RETURNING id",
          [name, msgId, lane, o.topic ?? "", bytes(data)],
        ));
      } catch (err) {
        throw appError("unavailable", "The ingestion queue is unavailable.", { cause: err, retryAfterSeconds: 1 });
      }
      published.add(lane);
      for (const w of wakers) w();
      return { duplicate: rows.length === 0 };
    },

    consume(handler, { concurrency }) {
      let stopped = false;
      const inHand = new Set<number>();
      // Claims of the rows in hand are extended every third of ackWaitMs.
      const progress = setInterval(() => {
        if (inHand.size === 0) return;
        void sql
          .query("UPDATE queue_messages SET visible_at = clock_timestamp() + $2 * interval '1 millisecond' WHERE id = ANY($1::bigint[])", [[...inHand], ackWaitMs])
          .catch(() => {});
      }, progressEveryMs(ackWaitMs));
      progress.unref();

      const settle = async (row: Row, data: Uint8Array) => {
        const outcome = await runHandler(handler, { id: row.msg_id, data, attempt: row.attempts, attrs: attrsOf(row.attrs) }, policy);
        if ("retryInMs" in outcome) {
          await sql.query("UPDATE queue_messages SET visible_at = clock_timestamp() + $2 * interval '1 millisecond' WHERE id = $1", [row.id, outcome.retryInMs]);
          return;
        }
        const dead = "dead" in outcome ? outcome.dead : [];
        if (dead.length === 0) {
          await sql.query("DELETE FROM queue_messages WHERE id = $1", [row.id]);
          return;
        }
        await sql.transaction(async (tx) => {
          for (const note of dead) {
            await tx.query(
              `INSERT INTO queue_dead_letters (queue, dead_key, msg_id, topic, attrs, payload, attempts, error)
               VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8) ON CONFLICT (queue, dead_key) DO NOTHING`,
              [name, deadKey(row.msg_id, note), row.msg_id, row.topic, JSON.stringify(note.attrs ?? {}), bytes(data), note.attempts ?? row.attempts, note.error],
            );
          }
          await tx.query("DELETE FROM queue_messages WHERE id = $1", [row.id]);
        });
      };

      const loop = async (claim: (n: number) => Promise<Row[]>, limit: number) => {
        const sem = new Semaphore(limit);
        let wakeUp: (() => void) | undefined;
        const waker = () => wakeUp?.();
        wakers.add(waker);
        while (!stopped) {
          const free = limit - sem.inUse;
          let rows: Row[] = [];
          if (free > 0) rows = await claim(free).catch(() => []); // database briefly unavailable: poll again later
          for (const row of rows) {
            await sem.acquire();
            inHand.add(Number(row.id));
            void settle(row, new Uint8Array(row.payload))
              .catch(() => {}) // the claim expires after ackWaitMs and the row is retried
              .finally(() => {
                inHand.delete(Number(row.id));
                sem.release();
                waker();
              });
          }
          if (rows.length === 0 || sem.inUse >= limit) {
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
        wakers.delete(waker);
        await sem.idle();
      };
      const loops = lanes ? Array.from({ length: lanes }, (_, p) => loop(() => claimHead(p), 1)) : [loop(claimAny, concurrency)];

      return {
        async stop() {
          stopped = true;
          for (const w of wakers) w();
          await Promise.all(loops);
          clearInterval(progress);
        },
      };
    },

    async stats() {
      const { rows } = await sql.query<{ lag: string | number; in_flight: string | number; dead: string | number }>(
        `SELECT (SELECT count(*) FROM queue_messages WHERE queue = $1) AS lag,
                (SELECT count(*) FROM queue_messages WHERE queue = $1 AND attempts > 0 AND visible_at > clock_timestamp()) AS in_flight,
                (SELECT count(*) FROM queue_dead_letters WHERE queue = $1) AS dead`,
        [name],
      );
      const r = rows[0]!;
      return { backend: "embedded", lag: Number(r.lag), inFlight: Number(r.in_flight), deadLetters: Number(r.dead) };
    },

    async listDeadLetters(q) {
      const after = parsePageToken(q.pageToken);
      const f = filterSql(q, 2);
      const { rows } = await sql.query<Row & { error: string; dead_at: Date | string }>(
        `SELECT ${COLUMNS}, error, dead_at FROM queue_dead_letters
         WHERE ${f.where} AND ($4::bigint = 0 OR id ${q.newestFirst ? "<" : ">"} $4)
         ORDER BY id ${q.newestFirst ? "DESC" : "ASC"} LIMIT $5`,
        [name, ...f.params, after, q.pageSize + 1],
      );
      const page = rows.slice(0, q.pageSize);
      const entries: DeadLetter[] = page.map((r) => ({
        id: String(r.id),
        msgId: r.msg_id,
        data: new Uint8Array(r.payload),
        topic: r.topic,
        attrs: attrsOf(r.attrs),
        attempts: Number(r.attempts),
        lastError: r.error,
        deadAt: new Date(r.dead_at),
      }));
      return { entries, nextPageToken: rows.length > q.pageSize ? entries[entries.length - 1]!.id : "" };
    },

    async replayDeadLetters(q) {
      const ids = q.ids ? numericIds(q.ids) : null;
      if (ids && ids.length === 0) return 0;
      const f = filterSql(q, 3);
      // One transaction: the dead letters are locked (a concurrent replay
      // of them waits, then finds them gone), queued again oldest first and
      // deleted, or none of it.
      const n = await sql.transaction(async (tx) => {
        const found = await tx.query<{ id: string | number; payload: Uint8Array }>(
          `SELECT id, payload FROM queue_dead_letters WHERE ${f.where} AND ($2::bigint[] IS NULL OR id = ANY($2::bigint[])) ORDER BY id FOR UPDATE`,
          [name, ids, ...f.params],
        );
        if (found.rows.length === 0) return 0;
        const lanesOf = found.rows.map((r) => (opts.lanes ? opts.lanes.of(new Uint8Array(r.payload)) : 0));
        const r = await tx.query(
          `WITH d AS (DELETE FROM queue_dead_letters WHERE id = ANY($2::bigint[]) RETURNING id, msg_id, topic, attrs, payload)
           INSERT INTO queue_messages (queue, msg_id, lane, topic, attrs, payload)
           SELECT $1, split_part(d.msg_id, '~replay~', 1) || '~replay~' || d.id, u.lane, d.topic, d.attrs, d.payload
           FROM d JOIN unnest($2::bigint[], $3::int[]) AS u(id, lane) ON u.id = d.id
           ORDER BY d.id
           ON CONFLICT (queue, msg_id) DO NOTHING`,
          [name, found.rows.map((x) => Number(x.id)), lanesOf],
        );
        return r.rowCount;
      });
      probe = undefined;
      for (const w of wakers) w();
      return n;
    },

    async close() {
      wakers.clear();
    },
  };
}
