// Builds and drops the per-field indexes of content types (field-indexes.ts)
// after their definition change has committed, so a build never holds locks
// of the definition transaction and entry writes go on while it runs.
//
// PostgreSQL: CREATE / DROP INDEX CONCURRENTLY, which cannot run in a
// transaction block and, when a build fails or is interrupted, leave an
// INVALID index behind: that one is dropped and built again (up to
// `attempts` times). Two concurrent builds on cms_entries wait for each
// other's snapshots and deadlock, so builds are serialized: in this process by
// a queue, across processes by an advisory lock held by an otherwise idle
// transaction (it holds no snapshot, so the concurrent build does not wait for
// it). A process waiting for the lock polls with pg_try_advisory_xact_lock in
// short transactions: a blocked lock request would hold a snapshot and
// deadlock with the running build.
// PGlite (one embedded connection): plain CREATE / DROP INDEX after commit.
//
// A build reconciles the content type as it is stored when the build starts
// (so queued requests for one type collapse into one build of its latest
// definition); a type that no longer exists loses its indexes.
import type { Sql } from "../../infra/storage/sql.js";
import { backoffMs, sleep } from "../../kernel/retry.js";
import type { FieldDef } from "./field-types.js";
import { createIndexDdl, desiredIndexes, dropIndexDdl, existingIndexes, type IndexedDef } from "./field-indexes.js";

const BUILD_LOCK = 7_020_401; // arbitrary, stable; DEFINITION_LOCK + 1

export interface IndexBuildReport {
  typeId: number;
  /** every index of the definition exists and is valid */
  ready: boolean;
  /** failures of this build (each index gave up after its attempts) */
  errors: unknown[];
}

export interface IndexBuildErrorInfo {
  typeId: number;
  index: string;
  attempt: number;
  /** another attempt follows */
  willRetry: boolean;
}

export interface IndexBuilderOptions {
  /** attempts per index and build (default 3) */
  attempts?: number;
  /** pause before the second attempt, doubled for each further one (default 1000 ms) */
  retryDelayMs?: number;
  /** poll interval while another process holds the build lock (default 200 ms) */
  lockPollMs?: number;
  onError?: (err: unknown, info: IndexBuildErrorInfo) => void;
}

interface DefRow {
  id: number;
  fields: FieldDef[];
  filterable_fields: string[];
  sortable_fields: string[];
}

const toIndexed = (r: DefRow): IndexedDef => ({
  id: Number(r.id),
  fields: r.fields,
  filterable: r.filterable_fields,
  sortable: r.sortable_fields,
});


export class IndexBuilder {
  private readonly queue = new Map<number, ((r: IndexBuildReport) => void)[]>();
  private loop: Promise<void> | undefined;
  private scans = new Set<Promise<unknown>>();
  private stopped = false;

  constructor(
    private readonly sql: Sql,
    private readonly opts: IndexBuilderOptions = {},
  ) {}

  /**
   * Queues a build of the content type's indexes. Resolves (never rejects)
   * once a build that started after this call has finished.
   */
  schedule(typeId: number): Promise<IndexBuildReport> {
    if (this.stopped) return Promise.resolve({ typeId, ready: false, errors: [new Error("index builder stopped")] });
    return new Promise((resolve) => {
      const waiters = this.queue.get(typeId);
      if (waiters) waiters.push(resolve);
      else this.queue.set(typeId, [resolve]);
      this.kick();
    });
  }

  /**
   * Queues a build for every content type whose indexes differ from its
   * definition (missing, INVALID or stale), including types deleted while
   * their indexes were being dropped: repairs builds a restart interrupted.
   */
  reconcileAll(): Promise<IndexBuildReport[]> {
    const scan = this.scanAll();
    this.scans.add(scan);
    void scan.then(
      () => this.scans.delete(scan),
      () => this.scans.delete(scan),
    );
    return scan;
  }

  private async scanAll(): Promise<IndexBuildReport[]> {
    const { rows } = await this.sql.query<DefRow>("SELECT id, fields, filterable_fields, sortable_fields FROM cms_content_types");
    const defs = rows.map(toIndexed);
    const { rows: idx } = await this.sql.query<{ name: string; valid: boolean }>(
      `SELECT c.relname AS name, i.indisvalid AS valid
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relname LIKE 'cms\\_ix\\_%'`,
    );
    const have = new Map(idx.map((r) => [r.name, r.valid]));
    const todo = new Set<number>();
    const wantedNames = new Set<string>();
    for (const d of defs) {
      for (const w of desiredIndexes(d)) {
        wantedNames.add(w.name);
        if (have.get(w.name) !== true) todo.add(d.id);
      }
    }
    for (const name of have.keys()) {
      const m = /^cms_ix_(\d+)_/.exec(name);
      if (m && !wantedNames.has(name)) todo.add(Number(m[1]));
    }
    return Promise.all([...todo].map((id) => this.schedule(id)));
  }

  /** Resolves when nothing is queued, scanned for or building. */
  async idle(): Promise<void> {
    while (this.loop || this.scans.size > 0) {
      await Promise.allSettled([...this.scans]);
      if (this.loop) await this.loop;
    }
  }

  /** Drops queued builds and waits for the one in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const [typeId, waiters] of this.queue) {
      for (const w of waiters) w({ typeId, ready: false, errors: [new Error("index builder stopped")] });
    }
    this.queue.clear();
    await this.idle();
  }

  private kick(): void {
    if (this.loop) return;
    this.loop = (async () => {
      while (this.queue.size > 0 && !this.stopped) {
        const [typeId, waiters] = this.queue.entries().next().value!;
        this.queue.delete(typeId);
        let report: IndexBuildReport;
        try {
          report = await this.build(typeId);
        } catch (err) {
          this.opts.onError?.(err, { typeId, index: "", attempt: 1, willRetry: false });
          report = { typeId, ready: false, errors: [err] };
        }
        for (const w of waiters) w(report);
      }
    })().finally(() => {
      this.loop = undefined;
      if (this.queue.size > 0 && !this.stopped) this.kick();
    });
  }

  private build(typeId: number): Promise<IndexBuildReport> {
    if (this.sql.kind === "pglite") return this.sync(typeId, false);
    return this.withBuildLock(() => this.sync(typeId, true));
  }

  private async withBuildLock<T>(fn: () => Promise<T>): Promise<T> {
    for (;;) {
      let out: { value: T } | undefined;
      await this.sql.transaction(async (tx) => {
        const { rows } = await tx.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock($1) AS ok", [BUILD_LOCK]);
        if (!rows[0]?.ok) return;
        // The extended-protocol statement above leaves its portal, and with it
        // a snapshot (xmin), open until the next message; the concurrent
        // build would wait for this transaction forever. A simple-protocol
        // statement releases it.
        await tx.exec("SELECT 1");
        out = { value: await fn() };
      });
      if (out) return out.value;
      if (this.stopped) throw new Error("index builder stopped");
      await sleep(this.opts.lockPollMs ?? 200);
    }
  }

  private async sync(typeId: number, concurrently: boolean): Promise<IndexBuildReport> {
    const { rows } = await this.sql.query<DefRow>(
      "SELECT id, fields, filterable_fields, sortable_fields FROM cms_content_types WHERE id = $1",
      [typeId],
    );
    const want = rows[0] ? desiredIndexes(toIndexed(rows[0])) : [];
    const have = await existingIndexes(this.sql, [typeId]);
    const wanted = new Set(want.map((w) => w.name));
    const errors: unknown[] = [];
    // stale ones first: writes stop maintaining them at once
    for (const name of have.keys()) {
      if (!wanted.has(name)) await this.attempt(typeId, name, errors, () => this.sql.exec(dropIndexDdl(name, concurrently)));
    }
    for (const w of want) {
      if (have.get(w.name) === true) continue;
      let leftover = have.has(w.name); // INVALID: a failed or interrupted concurrent build
      await this.attempt(typeId, w.name, errors, async () => {
        if (leftover) await this.sql.exec(dropIndexDdl(w.name, concurrently));
        leftover = true; // a failed CREATE INDEX CONCURRENTLY leaves an INVALID index
        await this.sql.exec(createIndexDdl(w, concurrently));
      });
    }
    return { typeId, ready: errors.length === 0, errors };
  }

  private async attempt(typeId: number, index: string, errors: unknown[], fn: () => Promise<void>): Promise<void> {
    const attempts = Math.max(1, this.opts.attempts ?? 3);
    for (let attempt = 1; ; attempt++) {
      try {
        await fn();
        return;
      } catch (err) {
        const willRetry = attempt < attempts && !this.stopped;
        this.opts.onError?.(err, { typeId, index, attempt, willRetry });
        if (!willRetry) {
          errors.push(err);
          return;
        }
        await sleep(backoffMs({ baseBackoffMs: this.opts.retryDelayMs ?? 1000, maxBackoffMs: Infinity }, attempt));
      }
    }
  }
}
