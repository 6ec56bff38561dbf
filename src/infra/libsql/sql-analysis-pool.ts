// Analyses long sql strings on a worker thread (sql-analysis.ts), so a
// request carrying megabytes of SQL never holds the service thread while
// it is tokenized and checked. One worker per process, started on first
// use, not keeping the process alive; requests are answered in order. A
// worker that dies is replaced and its pending requests fail.
import { Worker } from "node:worker_threads";
import type { Analysis } from "./sql-analysis.js";

const workerUrl = new URL("./sql-analysis-worker.ts", import.meta.url);

interface Waiting {
  resolve(a: Analysis[]): void;
  reject(e: Error): void;
}

let worker: Worker | undefined;
let nextId = 1;
const waiting = new Map<number, Waiting>();

function start(): Worker {
  // Node's type stripping loads the .ts files; no loader flags in the worker.
  const w = new Worker(workerUrl, { execArgv: [] });
  w.unref();
  w.on("message", (m: { id: number; analyses?: Analysis[]; error?: string }) => {
    const p = waiting.get(m.id);
    if (!p) return;
    waiting.delete(m.id);
    if (m.analyses) p.resolve(m.analyses);
    else p.reject(new Error(m.error ?? "the SQL analysis failed"));
  });
  const fail = (e: Error) => {
    if (worker !== w) return;
    worker = undefined;
    for (const p of waiting.values()) p.reject(e);
    waiting.clear();
  };
  w.on("error", fail);
  w.on("exit", () => fail(new Error("the SQL analysis worker exited")));
  return w;
}

/** The analyses of the strings, made on the worker thread. */
export function analyseOffThread(sqls: string[]): Promise<Analysis[]> {
  worker ??= start();
  const id = nextId++;
  const w = worker;
  return new Promise((resolve, reject) => {
    waiting.set(id, { resolve, reject });
    // ref'd while it works: a pending analysis keeps the process alive
    if (waiting.size === 1) w.ref();
    w.postMessage({ id, sqls });
  }).finally(() => {
    if (waiting.size === 0 && worker === w) w.unref();
  }) as Promise<Analysis[]>;
}
