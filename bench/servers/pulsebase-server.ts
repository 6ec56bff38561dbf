// The service under test for the bench runner: the real app (build + the
// capability modules) on real PostgreSQL (DATABASE_URL, default the local
// test database) in a fresh schema, and NATS when NATS_URL is set. It logs
// as `npm start` does (info, an access line per request, synchronous writes)
// into <data dir>/server.log (BENCH_LOG_LEVEL to change the level).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { build } from "../../src/server/build.js";
import { loadOrCreateTls } from "../../src/server/tls.js";
import { loadConfig } from "../../src/kernel/config.js";
import { logSerializers } from "../../src/infra/logging/logger.js";
import { loadOrCreateKeys } from "../../src/capabilities/identity/token-keys.js";
import { migrate } from "../../src/infra/storage/migrate.js";
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { createScratchSchema, dropScratchSchema } from "../../src/infra/storage/scratch-schema.js";
import { createModules } from "../../src/server/modules.js";

const url = process.env.DATABASE_URL || "postgres://root@127.0.0.1:5432/test";
const schema = await createScratchSchema(url, "bench");
const dataDir = process.env.BENCH_DATA_DIR ?? (await mkdtemp(join(tmpdir(), "bench-pb-")));
const config = loadConfig({
  ...process.env,
  PULSEBASE_DATA_DIR: dataDir,
  PULSEBASE_HOST: "127.0.0.1",
  PULSEBASE_HTTPS_PORT: "0",
  PULSEBASE_HTTP_PORT: "0",
  PULSEBASE_ADMIN_PORT: "0",
  PULSEBASE_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "info",
  DATABASE_URL: url,
});
const sql = createPgSql({ connectionString: url, schema, max: 16 });
await migrate(sql);
const operatorToken = "op_bench_operator_token_0123456789";
const app = await build(config, {
  sql,
  signingKeys: await loadOrCreateKeys(join(dataDir, "jwt-keys.json"), true),
  operatorToken,
  tls: await loadOrCreateTls({ dataDir }),
  logger: pino({ level: config.logLevel, serializers: logSerializers }, pino.destination({ dest: join(dataDir, "server.log"), sync: true })),
  modules: createModules,
});
const ports = await app.listen();
process.stdout.write(JSON.stringify({ ...ports, operatorToken, schema, dataDir }) + "\n");
process.on("SIGTERM", async () => {
  await app.close();
  await sql.close();
  await dropScratchSchema(url, schema);
  await rm(join(dataDir, "server.log"), { force: true });
  process.exit(0);
});
