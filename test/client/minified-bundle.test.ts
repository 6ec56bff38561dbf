// The SDK as an app ships it: bundled and minified by esbuild (class names
// mangled), loaded in Debian's Chromium and driven against a real server.
// Every error class keeps its name (`e.name === "NetworkError"`, not the
// minified "ee"), a CMS query is awaited as is, and SQL rows read as
// `const { rows } = await db.query(...)`.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { DatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { createModules } from "../../src/server/modules.js";
import { minifiedBundle } from "../../packages/client/scripts/size.js";
import { launchChromium } from "../capabilities/console/browser.js";
import { freePort } from "../helpers/ports.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
/** The app's page and its bundle, served on loopback (Chromium lets only a loopback page call the loopback server). */
let site: Server;
let browser: Browser;
let page: Page;
let appKey: string;
let bundle: string;

beforeAll(async () => {
  bundle = await minifiedBundle();
  s = await startTestServer({ modules: createModules });
  const app = await s.createApp("minified sdk");
  appKey = app.appKey;
  const db = await s.adminClient(DatabaseService).createDatabase({ teamId: app.teamId, name: "mini" });
  await s.adminClient(DatabaseService).linkDatabase({ databaseId: db.id, appId: app.appId });
  const cms = s.adminClient(CmsService);
  await cms.createContentType({ appId: app.appId, contentType: { slug: "article", name: "Article", fields: [{ name: "title", type: "text", required: true, label: "Title" }], sortableFields: ["title"] } });
  for (const title of ["One", "Two"]) await cms.createEntry({ appId: app.appId, contentType: "article", publish: true, data: { title } });

  browser = await launchChromium();
  // The server's certificate is the test's self-signed one.
  const ctx = await browser.newContext({ ignoreHTTPSErrors: true });
  page = await ctx.newPage();
  site = createServer((req, res) => {
    if (req.url === "/sdk.js") res.writeHead(200, { "content-type": "text/javascript" }).end(bundle);
    else res.writeHead(200, { "content-type": "text/html" }).end('<!doctype html><script type="module">import * as sdk from "/sdk.js"; window.sdk = sdk;</script>');
  });
  await new Promise<void>((r) => site.listen(0, "127.0.0.1", r));
  await page.goto(`http://127.0.0.1:${(site.address() as AddressInfo).port}/`);
  await page.waitForFunction("window.sdk !== undefined");
}, 120_000);

afterAll(async () => {
  await browser?.close();
  site?.close();
  await s?.close();
});

it("keeps every error class's name in a minified bundle", async () => {
  const dead = await freePort();
  const seen = await page.evaluate(async ({ base, dead, appKey }) => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const sdk = (globalThis as any).sdk;
    const client = sdk.createClient({ baseUrl: base, appKey });
    const db = sdk.createDatabase(client);
    const caught = async (p: Promise<unknown>) => {
      try {
        await p;
        return null;
      } catch (e) {
        const err = e as Error & { code?: string };
        const cls = ["PulsebaseError", "PlatformError", "ValidationError", "CmsError", "NetworkError", "StatementError"].filter((c) => err instanceof sdk[c]);
        return { name: err.name, code: err.code, classes: cls, stackHead: String(err.stack ?? "").split("\n")[0] };
      }
    };
    return {
      // The minifier did rename the classes: a name taken from the constructor would be wrong.
      ctorNames: ["PlatformError", "NetworkError"].map((c) => sdk[c].name),
      network: await caught(sdk.createClient({ baseUrl: `https://127.0.0.1:${dead}`, appKey, timeoutMs: 5000 }).ready()),
      platform: await caught(db.query("PRAGMA table_info(x)")),
      validation: await caught(db.batch([{ sql: "BEGIN" }, { sql: "SELECT 1" }], { transaction: true })),
      statement: await caught(db.rows("SELECT * FROM missing_table")),
      cms: await caught(sdk.createCms({ baseUrl: base, appKey }).from("no_such_type").fetch()),
      base: new sdk.PulsebaseError("x", 0, "c").name,
    };
  }, { base: s.httpsUrl, dead, appKey });

  expect(seen.ctorNames).not.toEqual(["PlatformError", "NetworkError"]);
  expect(seen.network).toMatchObject({ name: "NetworkError", code: "network_error", classes: ["PulsebaseError", "NetworkError"] });
  expect(seen.platform).toMatchObject({ name: "PlatformError", code: "forbidden_query", classes: ["PulsebaseError", "PlatformError"] });
  expect(seen.validation).toMatchObject({ name: "ValidationError", code: "validation_failed", classes: ["PulsebaseError", "ValidationError"] });
  expect(seen.statement).toMatchObject({ name: "StatementError", code: "statement_error", classes: ["PulsebaseError", "StatementError"] });
  expect(seen.cms).toMatchObject({ name: "CmsError", code: "CONTENT_TYPE_NOT_FOUND", classes: ["PulsebaseError", "CmsError"] });
  expect(seen.base).toBe("PulsebaseError");
});

it("runs a CMS query when it is awaited, and reads SQL rows by column name", async () => {
  const got = await page.evaluate(async ({ base, appKey }) => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const sdk = (globalThis as any).sdk;
    const client = sdk.createClient({ baseUrl: base, appKey });
    const page = await sdk.createCms({ baseUrl: base, appKey }).from("article").sort("title").perPage(10);
    const { rows, columns, values, results } = await sdk.createDatabase(client).query("SELECT 1 AS n, 'a' AS s; SELECT 2 AS id, 'b' AS title");
    return { titles: page.data?.map((e: { title: string }) => e.title), total: page.meta?.total, rows, columns, values, results: results.length };
  }, { base: s.httpsUrl, appKey });
  expect(got).toEqual({
    titles: ["One", "Two"], total: 2,
    rows: [{ id: 2, title: "b" }], columns: ["id", "title"], values: [[2, "b"]], results: 2,
  });
});
