// Whether a statement with a point read's shape may be served by the
// in-process reader (point-reader.ts), decided from SQLite's own plan. The
// decision runs in the engine process that ran the statement (on its
// connection, whose schema is already loaded), never on the service thread:
// loading a schema and planning cost time that grows with the schema, and
// the service thread is shared by every application. The verdict travels
// back with the statement's result and the reader keeps it until the schema
// version changes.
//
// Imported by engine-process.ts under Node's type stripping: erasable
// syntax only, and only type imports.
import type { DatabaseSync, SQLInputValue } from "node:sqlite";

export interface PointShape {
  /** The table named after FROM, unquoted. */
  table: string;
  /** How many `col = value` conditions the WHERE clause has. */
  conditions: number;
  /** The statement up to its LIMIT, rebuilt from its tokens (no comments). */
  head: string;
  /** The LIMIT value as written (a number, a string or a parameter), if any. */
  limit: string | undefined;
}

export interface PointVerdict {
  /** The reader may run it (as guardedRead(shape, version)). */
  point: boolean;
  /** A rowid lookup: at most one row. */
  single: boolean;
  /** PRAGMA schema_version the verdict was made on (-1: unknown). */
  version: number;
}

/** The statement that runs: the read, reading nothing unless the schema is `version`. */
export function guardedRead(shape: PointShape, version: number): string {
  return `${shape.head} LIMIT CASE WHEN (SELECT schema_version FROM pragma_schema_version) = ${version} THEN ${shape.limit ?? "-1"} ELSE 0 END`;
}

// One SEARCH on a table through the integer primary key, the primary key or an index.
const SEARCH = /^SEARCH (\S+) USING (?:INTEGER PRIMARY KEY|PRIMARY KEY|(?:COVERING )?INDEX \S+) \((.*)\)$/;

/**
 * Decides from SQLite's plan whether the statement is a point read, inside
 * one read transaction (version, plan and table definition from one
 * snapshot). `db` must have no transaction open. A schema larger than
 * `maxSchemaBytes` (a file made before the schema caps) is never served by
 * the reader, which would have to load it on the service thread.
 */
export function classifyPoint(db: DatabaseSync, shape: PointShape, args: readonly unknown[], maxSchemaBytes: number): PointVerdict {
  const all = (sql: string, params: readonly unknown[]) => {
    const st = db.prepare(sql);
    st.setReturnArrays(true);
    return st.all(...(params as SQLInputValue[])) as unknown as unknown[][];
  };
  let open = false;
  // a failure after the version is known keeps that version: the "not a
  // point read" verdict then holds until the schema changes, instead of
  // being made again on every request
  let version = -1;
  try {
    db.exec("BEGIN");
    open = true;
    version = Number(all("PRAGMA schema_version", [])[0]![0]);
    const no: PointVerdict = { point: false, single: false, version };
    const size = all("SELECT coalesce(sum(octet_length(sql)), 0) FROM main.sqlite_schema", [])[0]![0];
    if (Number(size) > maxSchemaBytes) return no;
    // Statistics (after ANALYZE) can make the plan depend on the bound values
    // (stat4) or differ between connections (stat1): none of that here.
    if (all("SELECT 1 FROM main.sqlite_schema WHERE name IN ('sqlite_stat1', 'sqlite_stat4')", []).length > 0) return no;
    let plan: unknown[][];
    try {
      plan = all(`EXPLAIN QUERY PLAN ${shape.head}${shape.limit === undefined ? "" : ` LIMIT ${shape.limit}`}`, args);
    } catch {
      return no; // not compilable: the engine reports the error
    }
    if (plan.length !== 1) return no;
    const m = SEARCH.exec(String(plan[0]![3]));
    // the table read is the one named (a view over it may compute columns),
    // and every condition is answered by the key or index
    if (!m || m[1]!.toLowerCase() !== shape.table.toLowerCase() || m[2]!.split(" AND ").length !== shape.conditions) return no;
    const def = all("SELECT type, sql FROM main.sqlite_schema WHERE name = ? COLLATE NOCASE", [shape.table])[0];
    if (!def || def[0] !== "table" || /^\s*CREATE\s+VIRTUAL\b/i.test(String(def[1]))) return no;
    // generated columns are computed on read: their cost is unbounded
    if (all("SELECT hidden FROM pragma_table_xinfo(?) WHERE hidden IN (2, 3)", [shape.table]).length > 0) return no;
    // A partial index makes the plan depend on the bound values: SQLite
    // uses it when a bound value implies its WHERE and re-plans the
    // statement (maybe as a full scan) when another value is bound.
    if (all("SELECT 1 FROM pragma_index_list(?) WHERE partial", [shape.table]).length > 0) return no;
    // the statement that runs reads the table the same way (its LIMIT adds
    // only the schema-version subquery)
    const guarded = all(`EXPLAIN QUERY PLAN ${guardedRead(shape, version)}`, args)
      .map((r) => String(r[3]))
      .filter((d) => /^(SEARCH|SCAN) /.test(d) && !d.startsWith("SCAN pragma_schema_version VIRTUAL TABLE"));
    if (guarded.length !== 1 || guarded[0] !== String(plan[0]![3])) return no;
    return { point: true, single: m[2] === "rowid=?", version };
  } catch {
    return { point: false, single: false, version };
  } finally {
    try {
      if (open) db.exec("COMMIT");
    } catch {
      // nothing was written
    }
  }
}
