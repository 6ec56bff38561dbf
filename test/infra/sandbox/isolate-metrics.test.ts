// The isolate figures in /metrics (src/server/metrics.ts) read from a real
// sandbox: per application, isolates by state and the heap they keep (only
// applications with isolates or waiting runs are listed), and the isolates
// disposed for keeping too much heap.
import { afterAll, describe, expect, it } from "vitest";
import { Registry } from "prom-client";
import { createSandbox } from "../../../src/infra/sandbox/sandbox.js";
import { registerIsolateMetrics } from "../../../src/server/metrics.js";
import type { RunInput, RunTarget } from "../../../src/infra/sandbox/types.js";
import { until } from "../../helpers/until.js";

const MiB = 1024 * 1024;
const sandbox = createSandbox({ capabilities: [], limits: { maxIsolates: 8, isolatesPerVersion: 2, keepHeapBytes: 16 * MiB, syncSliceMs: 0 } });
afterAll(() => sandbox.close());
const registry = new Registry();
registerIsolateMetrics(registry, () => sandbox.stats());

const input: RunInput = { req: null, consumer: null, event: null, env: {}, trigger: "http", requestId: "r1" };
const target = (versionId: number, appId: number, code: string): RunTarget => ({ versionId, appId, code, memoryMb: 64, timeoutMs: 5000 });

async function series(name: string): Promise<Array<{ labels: Record<string, string | number>; value: number }>> {
  const m = (await registry.getSingleMetric(name)!.get()) as { values: Array<{ labels: Record<string, string | number>; value: number }> };
  return m.values;
}

describe("isolate metrics", () => {
  it("lists each application's isolates and kept heap, and counts heap disposals", async () => {
    await sandbox.run(target(1, 7, `export default () => (globalThis.k = new Uint8Array(4 * 1024 * 1024).fill(1)).length`), input);
    await sandbox.run(target(2, 9, `export default () => (globalThis.k = new Uint8Array(24 * 1024 * 1024).fill(1)).length`), input);
    await until(async () => (sandbox.stats().apps.every((a) => a.busy === 0) ? true : undefined), 10_000, 5);
    const isolates = await series("pulsebase_isolate_app_isolates");
    expect(isolates).toContainEqual({ labels: { app: "7", state: "idle" }, value: 1 });
    expect(isolates).toContainEqual({ labels: { app: "7", state: "busy" }, value: 0 });
    // app 9's only isolate was disposed: the application is no longer listed
    expect(isolates.filter((s) => s.labels.app === "9")).toEqual([]);
    const heap = await series("pulsebase_isolate_app_heap_bytes");
    expect(heap).toHaveLength(1);
    expect(heap[0]!.labels).toEqual({ app: "7" });
    expect(heap[0]!.value).toBeGreaterThan(4 * MiB);
    expect((await series("pulsebase_isolate_heap_disposals_total"))[0]!.value).toBe(1);
    expect((await series("pulsebase_isolate_heap_bytes"))[0]!.value).toBe(heap[0]!.value);
  });
});
