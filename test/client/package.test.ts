// The package as an app gets it: the ESM build with type declarations, the
// browser bundle of identity + analytics within its 10 kB (gzipped) budget
// and free of the parts it does not import, and `npm pack` producing a
// tarball that installs into an empty project, imports (both entry points),
// type-checks in a TypeScript app, and talks to a real server.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUDGET_BYTES, measureBrowserBundle } from "../../packages/client/scripts/size.js";
import { startDevServer, type DevServer } from "../../examples/web/dev-server.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { eventCounts, waitFor } from "./sdk-fixture.js";

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "../..");
const PKG = join(ROOT, "packages/client");
let tmp: string;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "pb-sdk-pack-"));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

describe("@pulsebase/client as a package", () => {
  it("the browser bundle of identity + analytics is within the budget and leaves the other parts out", async () => {
    const m = await measureBrowserBundle();
    console.log(`[sdk size] identity + analytics + crash capture: ${m.minified} B minified, ${m.gzipped} B gzipped (budget ${BUDGET_BYTES} B)`);
    expect(m.gzipped).toBeLessThanOrEqual(BUDGET_BYTES);
    expect(m.code).toContain("/api/events/batch");
    for (const absent of ["/api/db/query", "/api/fn/", "/api/v1", "indexedDB"]) expect(m.code).not.toContain(absent);
  });

  describe("npm pack", () => {
    let s: TestServer;
    let dev: DevServer;
    let appKey: string;
    let appId: bigint;
    let project: string;

    beforeAll(async () => {
      s = await startTestServer({ modules: createModules });
      ({ appKey, appId } = await s.createApp("sdk pack"));
      dev = await startDevServer({ upstream: s.httpsUrl, insecure: true });
      // prepack builds dist/ with tsc
      await run("npm", ["pack", "--pack-destination", tmp], { cwd: PKG });
      project = join(tmp, "app");
      await run("mkdir", ["-p", project]);
      await writeFile(join(project, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
      const tarball = (await readdir(tmp)).find((f) => f.endsWith(".tgz"))!;
      await run("npm", ["install", "--no-audit", "--no-fund", "--offline", join(tmp, tarball)], { cwd: project });
    }, 120_000);
    afterAll(async () => {
      await dev?.close();
      await s?.close();
    });

    it("ships ESM with declarations and only dist/", async () => {
      const dir = join(project, "node_modules/@pulsebase/client");
      for (const f of ["package.json", "dist/index.js", "dist/index.d.ts", "dist/node.js", "dist/node.d.ts", "dist/analytics.d.ts"]) {
        expect(existsSync(join(dir, f)), f).toBe(true);
      }
      expect(existsSync(join(dir, "src"))).toBe(false);
    });

    it("installs, imports and sends an event to a real server", async () => {
      await writeFile(join(project, "main.js"), `
        import { createClient, createAnalytics, ValidationError } from "@pulsebase/client";
        import { fileStorage } from "@pulsebase/client/node";
        const client = createClient({ baseUrl: process.argv[2], appKey: process.argv[3], storage: fileStorage("./.pulsebase"),
          device: { country: "DE", language: "de" } });
        const analytics = createAnalytics(client, { lifecycle: false });
        analytics.track("from_the_tarball", { ok: "yes" });
        await analytics.shutdown();
        console.log(JSON.stringify({ consumer: client.identity.consumerId, sent: analytics.stats().sent.events, validation: typeof ValidationError }));
      `);
      const { stdout } = await run(process.execPath, ["main.js", dev.url, appKey], { cwd: project });
      expect(JSON.parse(stdout)).toMatchObject({ consumer: expect.any(Number), sent: 1, validation: "function" });
      await waitFor(() => eventCounts(s, appId, "from_the_tarball"), (c) => c.occurrences === 1);
      expect(await eventCounts(s, appId, "from_the_tarball")).toEqual({ rows: 1, occurrences: 1 });
    });

    it("type-checks in a TypeScript app (and refuses a wrong use)", async () => {
      const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
      const opts = ["--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", "--skipLibCheck", "--types", "node", "--typeRoots", join(ROOT, "node_modules/@types")];
      await writeFile(join(project, "ok.ts"), `
        import { createClient, createDatabase, createCms, type DbResult } from "@pulsebase/client";
        interface Todo { id: number; title: string }
        const client = createClient({ baseUrl: "https://x", appKey: "k" });
        export async function f(): Promise<string> {
          const r: DbResult<Todo> = (await createDatabase(client).query<Todo>("SELECT id, title FROM todos")).results[0]!;
          const a = await createCms(client).from<{ title: string; views: number }>("article").where("views", "gt", 3).sort("-views").fetch();
          return r.rows[0]!.title + a.data[0]!.title;
        }
      `);
      await run(process.execPath, [tsc, ...opts, "ok.ts"], { cwd: project });
      await writeFile(join(project, "bad.ts"), `
        import { createClient, createCms } from "@pulsebase/client";
        const cms = createCms(createClient({ baseUrl: "https://x", appKey: "k" }));
        cms.from<{ title: string }>("article").sort("-nope");
      `);
      const bad = await run(process.execPath, [tsc, ...opts, "bad.ts"], { cwd: project }).then(() => "", (e: { stdout: string }) => e.stdout);
      expect(bad).toMatch(/-nope/);
    }, 90_000);
  });
});
