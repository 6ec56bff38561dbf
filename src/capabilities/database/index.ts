// What other capabilities may use of the database capability
// (docs/architecture.md, "Layers"): the functions' ctx.db and change capture.
export { DEFAULT_DATABASE_LIMITS } from "./database-config.js";
export type { DatabaseStore, LinkedDatabase } from "./database-store.js";
export type { QueryRunner } from "./query-runner.js";
