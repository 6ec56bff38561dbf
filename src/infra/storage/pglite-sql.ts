// Sql over PGlite: embedded PostgreSQL in the data directory, no server.
import { PGlite, types } from "@electric-sql/pglite";
import { pg_trgm } from "@electric-sql/pglite/contrib/pg_trgm";
import type { QueryResult, Sql } from "./sql.js";
import { translatePgError } from "./pg-errors.js";

type Tx = Pick<PGlite, "query" | "exec">;

const parsers = {
  [types.INT8]: (v: string) => Number(v),
  [types.NUMERIC]: (v: string) => Number(v),
};

/** The options every PGlite of the service is made with (the extensions, how numbers are read). */
export const PGLITE_OPTIONS = { extensions: { pg_trgm }, parsers };

/** dataDir undefined means in memory (tests). */
export async function createPgliteSql(dataDir?: string): Promise<Sql> {
  return pgliteSql(await PGlite.create(dataDir, PGLITE_OPTIONS));
}

/** Sql over a PGlite made with PGLITE_OPTIONS (tests make theirs from a snapshot: test/helpers/db.ts); close() closes it. */
export function pgliteSql(db: PGlite): Sql {
  return wrap(db, db);
}

function wrap(target: Tx, root: PGlite): Sql {
  return {
    kind: "pglite",
    async query<R>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      try {
        const r = await target.query<R>(text, params as unknown[]);
        return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
      } catch (err) {
        throw translatePgError(err);
      }
    },
    async exec(text: string): Promise<void> {
      try {
        await target.exec(text);
      } catch (err) {
        throw translatePgError(err);
      }
    },
    async transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> {
      if (target !== root) return fn(wrap(target, root));
      try {
        return await root.transaction((tx) => fn(wrap(tx as unknown as Tx, root)));
      } catch (err) {
        throw translatePgError(err);
      }
    },
    close: () => (target === root ? root.close() : Promise.resolve()),
  };
}
