// The worker thread of sql-analysis-pool.ts: analyses the sql strings it is
// sent, in order. Runs under Node's type stripping (no loader in workers).
import { parentPort } from "node:worker_threads";
import { analyseSql } from "./sql-analysis.ts";

parentPort!.on("message", (m: { id: number; sqls: string[] }) => {
  try {
    parentPort!.postMessage({ id: m.id, analyses: m.sqls.map(analyseSql) });
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: e instanceof Error ? e.message : String(e) });
  }
});
