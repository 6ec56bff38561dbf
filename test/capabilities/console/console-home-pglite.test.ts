// The first hour's server side on the embedded default (PGlite): setup
// adopts the team `apps create` made (and renames it when a name is given);
// GetOverview counts the last 24 hours, a failed function run and the
// database's size, and is scoped by role; GetEventBreakdown honours the
// range; ListMedia's file_ids filter names stored files.
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, expect, it } from "vitest";
import { AnalyticsService } from "../../../gen/pulsebase/admin/v1/analytics_pb.js";
import { CmsService } from "../../../gen/pulsebase/admin/v1/cms_pb.js";
import { DatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { OverviewService } from "../../../gen/pulsebase/admin/v1/overview_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createModules } from "../../../src/server/modules.js";
import { deployHttpFunction, startTestServer, type TestServer } from "../../helpers/server.js";
import { until } from "../../helpers/until.js";
import { codeOf, invite, setupOwner } from "./operator-session.js";

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ kind: "pglite", modules: createModules });
}, 60_000);
afterAll(() => s?.close());

it("adopts the CLI's team at setup, then counts the last 24 hours on the home page, scoped by role", { timeout: 60_000 }, async () => {
  // `pulsebase apps create --name shop` before the setup link.
  const team = await s.admin.createTeam({ name: "shop" });
  const app = await s.admin.createApp({ teamId: team.id, name: "shop" });
  const owner = await setupOwner(s); // with the team name "Acme"
  expect(owner.me.teams.map((t) => [t.teamId, t.teamName])).toEqual([[team.id, "Acme"]]);
  expect((await s.db.sql.query("SELECT id FROM teams")).rows).toHaveLength(1);

  const dev = await s.register(app.appKey, { user_id: "u1" });
  const post = (path: string, body: unknown) =>
    s.fetch(path, { method: "POST", headers: { authorization: `Bearer ${dev.token}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  for (const sku of ["A1", "A1", "B2"]) expect((await post("/api/events", { name: "purchase", metadata: { sku } })).status).toBe(200);
  const { session_id: sid } = (await (await post("/api/session/start", {})).json()) as { session_id: number };
  const old = new Date(Date.now() - 20 * 86400_000).toISOString();
  expect((await post("/api/events/batch", { events: [{ name: "purchase", session_id: sid, metadata: { sku: "OLD" }, created_at: old }] })).status).toBe(202);
  expect((await post("/api/logs", { app_version: "1.0", classFQN: "com.shop.Crash", message: "boom", type: "crash" })).status).toBe(200);
  await deployHttpFunction(s, app.id, "broken", "export default async () => { throw new Error('no stock'); };");
  expect((await s.fetch("/api/fn/broken", { headers: { authorization: `Bearer ${dev.token}` } })).status).toBe(500);
  const dbs = s.adminClient(DatabaseService);
  const db = await dbs.createDatabase({ teamId: team.id, name: "main" });
  await dbs.linkDatabase({ databaseId: db.id, appId: app.id });

  const overview = owner.client(OverviewService);
  const o = await until(async () => {
    const r = await overview.getOverview({ teamId: 0n });
    return r.apps[0]?.functionFailures24h === 1n && r.apps[0]?.events24h === 3n ? r : undefined;
  }, 20_000);
  expect(o.apps.map((a) => [a.name, a.events24h, a.errors24h, a.functionRuns24h, a.functionFailures24h])).toEqual([["shop", 3n, 1n, 1n, 1n]]);
  expect(o.totalApps).toBe(1n);
  expect(o.queues.map((q) => q.name)).toContain("analytics");
  expect(o.databases.map((d) => [d.name, d.appIds])).toEqual([["main", [app.id]]]);
  expect(o.databases[0]!.sizeBytes).toBeGreaterThan(0n);

  // The breakdown of a range: the last 14 days leave out the event of 20 days ago.
  const ev = (await owner.client(AnalyticsService).listEvents({ filter: { appId: app.id } })).events[0]!;
  const range = (days: number) => ({ from: timestampFromDate(new Date(Date.now() - days * 86400_000)), to: timestampFromDate(new Date(Date.now() + 60_000)) });
  await until(async () => ((await owner.client(AnalyticsService).getEvent({ id: ev.id })).occurrences === 4n ? true : undefined), 20_000);
  const recent = await owner.client(AnalyticsService).getEventBreakdown({ eventId: ev.id, ...range(14) });
  expect([recent.total, recent.values.map((v) => [v.key, v.value, v.occurrences])]).toEqual([3n, [["sku", "A1", 2n], ["sku", "B2", 1n]]]);
  const month = await owner.client(AnalyticsService).getEventBreakdown({ eventId: ev.id, ...range(30) });
  expect([month.total, month.values.map((v) => v.value)]).toEqual([4n, ["A1", "B2", "OLD"]]);
  expect(await codeOf(owner.client(AnalyticsService).getEventBreakdown({ eventId: ev.id }))).toBe(Code.InvalidArgument);

  // A viewer of another team: its own team only; this team is not_found; every team at once is refused.
  const other = await s.admin.createTeam({ name: "Other" });
  const viewer = await invite(s, owner, other.id, "viewer@example.com", Role.VIEWER);
  const theirs = await viewer.client(OverviewService).getOverview({ teamId: other.id });
  expect(theirs.apps).toEqual([]);
  expect(await codeOf(viewer.client(OverviewService).getOverview({ teamId: team.id }))).toBe(Code.NotFound);
  expect(await codeOf(viewer.client(OverviewService).getOverview({ teamId: 0n }))).toBe(Code.PermissionDenied);

  // Media names for stored values.
  const cms = owner.client(CmsService);
  const m = await cms.uploadMedia({ appId: app.id, filename: "team photo.png", contentType: "image/png", data: new Uint8Array([137, 80, 78, 71]) });
  await cms.uploadMedia({ appId: app.id, filename: "other.png", contentType: "image/png", data: new Uint8Array([137, 80, 78, 71]) });
  const named = await cms.listMedia({ appId: app.id, fileIds: [m.fileId, "00000000-0000-4000-8000-000000000000.png"] });
  expect(named.media.map((x) => x.filename)).toEqual(["team photo.png"]);
  expect(await codeOf(cms.listMedia({ appId: app.id, fileIds: Array.from({ length: 101 }, (_, i) => `${i}.png`) }))).toBe(Code.InvalidArgument);
});
