// What other capabilities may use of the database capability
// (docs/architecture.md, "Layers"): what the functions' change capture needs
// (it runs on the linked databases and answers in ctx.db's result shape).
export { DEFAULT_DATABASE_LIMITS } from "./database-config.js";
export type { DatabaseStore, LinkedDatabase } from "./database-store.js";
export type { FunctionDbResult, FunctionDbStatement } from "./function-db.js";
