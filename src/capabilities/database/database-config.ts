// Configuration of the database capability, passed in by the app factory.
export interface DatabaseLimits {
  /** Statements per request, after splitting every sql string (query and batch). */
  maxStatements: number;
  /** Characters per sql string. */
  maxSqlLength: number;
  /** Parameter values per statement entry (params array length or object keys). */
  maxParams: number;
  /** Rows one statement may return. */
  maxRows: number;
  /** Approximate bytes of row values one request may return. */
  maxResultBytes: number;
  /** Wall-clock limit of one request's statements, in milliseconds. */
  queryTimeoutMs: number;
  /** Size an embedded database file may grow to (SQLite max_page_count); also the cap of a connection's temp database. */
  maxDatabaseBytes: number;
  /** Largest string or blob a statement may make or read (SQLITE_LIMIT_LENGTH), embedded databases. */
  maxValueBytes: number;
  /** Bytes of CREATE statements in an embedded database's schema (sqlite_schema.sql), checked after each CREATE/ALTER. */
  maxSchemaBytes: number;
  /** Tables, indexes, views and triggers in an embedded database's schema. */
  maxSchemaObjects: number;
  /** Columns of one table of an embedded database. */
  maxColumnsPerTable: number;
  /** Resident memory of one engine process: over it, a busy engine is stopped (400 query_too_large) and an idle one replaced. */
  maxEngineMemoryBytes: number;
  /** PRAGMA journal_size_limit: the size a WAL is cut back to when it is reset. */
  walSizeLimitBytes: number;
  /**
   * Requests of one application running at once on the engine processes;
   * 0 = half the processes, at least 1 (fair-queue.ts).
   */
  appRunning: number;
  /** Requests of one application waiting to start (engine or remote); more are refused (503). */
  appQueued: number;
  /** How long a request may wait to start before it is refused (503), in milliseconds. */
  queueWaitMs: number;
  /** Requests of one application outstanding at once on its remote libSQL server. */
  remoteAppRunning: number;
  /** A running request whose function run ended is stopped (its engine killed) after this long, in ms. */
  abandonGraceMs: number;
}

export const DEFAULT_DATABASE_LIMITS: DatabaseLimits = {
  maxStatements: 100,
  maxSqlLength: 100_000,
  maxParams: 1000,
  maxRows: 10_000,
  maxResultBytes: 8 * 1024 * 1024,
  queryTimeoutMs: 5000,
  maxDatabaseBytes: 1024 * 1024 * 1024,
  maxValueBytes: 16 * 1024 * 1024,
  maxSchemaBytes: 64 * 1024,
  maxSchemaObjects: 256,
  maxColumnsPerTable: 100,
  maxEngineMemoryBytes: 512 * 1024 * 1024,
  walSizeLimitBytes: 64 * 1024 * 1024,
  appRunning: 0,
  appQueued: 64,
  queueWaitMs: 2000,
  remoteAppRunning: 8,
  abandonGraceMs: 500,
};

export interface DatabaseConfig {
  /** Directory of the embedded database files (created when missing). */
  dataDir: string;
  limits?: Partial<DatabaseLimits>;
  /** Engine processes running embedded databases (default 2). */
  engineProcesses?: number;
  /** Nice value added to the engine processes' CPU priority (default 5; 0 = the service's own). */
  engineNice?: number;
  /** How long the query path may use a cached app -> database lookup (default 1000 ms). */
  linkCacheMs?: number;
  /** Serve point reads of embedded databases in the service process (default true; see point-reader.ts). */
  pointReads?: boolean;
  /** Time limit of the remote server check during provisioning (default 5000 ms). */
  remoteCheckTimeoutMs?: number;
}
