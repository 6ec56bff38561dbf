// Realtime CMS subscriptions and the Connect stream's table and CMS topics
// on one real server (PostgreSQL, no NATS: the in-process change log), with
// real `ws` clients and a Connect client (docs/realtime.md, "CMS changes").
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { toJson } from "@bufbuild/protobuf";
import { Agent, fetch } from "undici";
import { CmsService } from "../../../gen/pulsebase/admin/v1/cms_pb.js";
import { DatabaseService as AdminDatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { SqlService } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
import { RealtimeEventSchema, RealtimeService, type RealtimeEvent } from "../../../gen/pulsebase/platform/v1/realtime_pb.js";
import { createModules } from "../../../src/server/modules.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { connect, type Msg, type RtClient } from "./ws-client.js";

let s: TestServer;
let wsUrl: string;
let appKey: string;
let appId: bigint;
let cms: Client<typeof CmsService>;
let mediaId: string;
let draftPerson: string;
let livePerson: string;
const open: RtClient[] = [];
const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  wsUrl = s.httpsUrl.replace("https:", "wss:") + "/api/realtime";
  ({ appKey, appId } = await s.createApp("rt-cms"));
  cms = s.adminClient(CmsService);
  await cms.createContentType({ appId, contentType: { slug: "person", name: "Person", fields: [{ name: "name", type: "text", label: "Name" }] } });
  await cms.createContentType({
    appId,
    contentType: {
      slug: "article",
      name: "Article",
      fields: [
        { name: "title", type: "text", required: true, label: "Title" },
        { name: "cover", type: "media", label: "Cover" },
        { name: "author", type: "relation", label: "Author", target: "person" } as never,
        { name: "reviewers", type: "relation", label: "Reviewers", target: "person", multi: true } as never,
      ],
    },
  });
  mediaId = (await cms.uploadMedia({ appId, filename: "c.png", contentType: "image/png", data: new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1]) } as never)).fileId;
  livePerson = (await cms.createEntry({ appId, contentType: "person", publish: true, data: { name: "Ann" } })).id;
  draftPerson = (await cms.createEntry({ appId, contentType: "person", publish: false, data: { name: "Bob" } })).id;
}, 60_000);

afterAll(async () => {
  for (const c of open) c.ws.terminate();
  await dispatcher.close();
  await s?.close();
});

async function client(token: string): Promise<RtClient> {
  const c = await connect(wsUrl, { token });
  open.push(c);
  await c.next((m) => m.type === "welcome", "welcome");
  return c;
}

async function subscribe(c: RtClient, id: string, topic: Record<string, unknown>, resume?: string): Promise<Msg> {
  c.send({ type: "subscribe", id, topic, ...(resume !== undefined && { resume }) });
  return c.next((m) => (m.type === "subscribed" || m.type === "error") && m.id === id, `subscription ${id}`);
}

const changes = (c: RtClient, id: string) => c.messages.filter((m) => m.type === "change" && m.id === id);
async function nChanges(c: RtClient, id: string, n: number): Promise<Msg[]> {
  await c.next(() => changes(c, id).length >= n, `${n} changes on ${id}`);
  return changes(c, id);
}

/** The read API's answer for the entry (GET /api/v1/<type>/<uuid>). */
async function readApi(type: string, id: string): Promise<unknown> {
  const res = await s.fetch(`/api/v1/${type}/${id}`, { headers: { "x-app-key": appKey } });
  expect(res.status).toBe(200);
  return (await res.json()).data;
}

describe("CMS subscriptions over the WebSocket", () => {
  it("delivers publish, update and unpublish of published content only, rendered as the read API renders it", async () => {
    const dev = await s.register(appKey);
    const c = await client(dev.token);
    expect(await subscribe(c, "a", { kind: "cms", content_type: "article" })).toEqual({ type: "subscribed", id: "a", topic: { kind: "cms", content_type: "article" } });
    expect(await subscribe(c, "p", { kind: "cms", content_type: "person" })).toMatchObject({ type: "subscribed" });
    expect(await subscribe(c, "x", { kind: "cms", content_type: "nope" })).toMatchObject({ type: "error", id: "x", code: "not_found" });

    // a draft: created and updated, never sent
    const draft = await cms.createEntry({ appId, contentType: "article", publish: false, data: { title: "Draft" } });
    await cms.updateEntry({ appId, id: draft.id, data: { title: "Draft 2" } });
    // published at once, with a media file and relations to a published and a draft person
    const e = await cms.createEntry({ appId, contentType: "article", publish: true, data: { title: "One", cover: mediaId, author: draftPerson, reviewers: [livePerson, draftPerson] } });
    const [pub] = await nChanges(c, "a", 1);
    expect(pub).toEqual({ type: "change", id: "a", op: "publish", content_type: "article", entry: await readApi("article", e.id), cursor: expect.any(String), at: expect.any(String) });
    expect((pub!.entry as Msg).cover_url).toContain(`/${appKey}/cms/media/${mediaId}`);
    expect((pub!.entry as Msg).author).toBeNull();
    expect((pub!.entry as Msg).reviewers).toEqual([livePerson]);

    await cms.updateEntry({ appId, id: e.id, data: { title: "One!" } });
    const upd = (await nChanges(c, "a", 2))[1]!;
    expect(upd).toMatchObject({ op: "update", content_type: "article" });
    expect(upd.entry).toEqual(await readApi("article", e.id));
    expect((upd.entry as Msg).title).toBe("One!");

    await cms.unpublishEntry({ appId, id: e.id });
    // (an update of an unpublished entry is not sent either)
    await cms.updateEntry({ appId, id: e.id, data: { title: "Hidden" } });
    await cms.publishEntry({ appId, id: draft.id });
    const all = await nChanges(c, "a", 4);
    expect(all[2]).toEqual({ type: "change", id: "a", op: "unpublish", content_type: "article", entry: { id: e.id }, cursor: expect.any(String), at: expect.any(String) });
    expect(all[3]).toMatchObject({ op: "publish", entry: { id: draft.id, title: "Draft 2" } });
    expect(all[3]!.entry).toEqual(await readApi("article", draft.id));
    // in order, each once: the draft's earlier changes never came
    expect(all.map((m) => [m.op, (m.entry as Msg).id])).toEqual([["publish", e.id], ["update", e.id], ["unpublish", e.id], ["publish", draft.id]]);
    expect(new Set(all.map((m) => m.cursor)).size).toBe(4);

    // deleting a published entry is its unpublish; the person subscription saw only persons
    await cms.deleteEntry({ appId, id: draft.id });
    expect((await nChanges(c, "a", 5))[4]).toMatchObject({ op: "unpublish", entry: { id: draft.id } });
    expect(changes(c, "p")).toEqual([]);
    await cms.updateEntry({ appId, id: livePerson, data: { name: "Ann B" } });
    expect((await nChanges(c, "p", 1))[0]).toMatchObject({ op: "update", content_type: "person", entry: { id: livePerson, name: "Ann B" } });
  });

  it("resumes after a disconnect with each missed change exactly once, then the live ones; an unknown cursor is a resync", async () => {
    const dev = await s.register(appKey);
    const c1 = await client(dev.token);
    await subscribe(c1, "r", { kind: "cms", content_type: "article" });
    const x = await cms.createEntry({ appId, contentType: "article", publish: true, data: { title: "X" } });
    const [first] = await nChanges(c1, "r", 1);
    c1.close();
    await c1.closed;

    // missed while away (each authoring call answers once its change is stored)
    await cms.updateEntry({ appId, id: x.id, data: { title: "X2" } });
    const y = await cms.createEntry({ appId, contentType: "article", publish: true, data: { title: "Y" } });

    const c2 = await client(dev.token);
    expect(await subscribe(c2, "r", { kind: "cms", content_type: "article" }, first!.cursor as string)).toMatchObject({ type: "subscribed" });
    const missed = await nChanges(c2, "r", 2);
    expect(missed.map((m) => [m.op, (m.entry as Msg).id, (m.entry as Msg).title])).toEqual([["update", x.id, "X2"], ["publish", y.id, "Y"]]);
    await cms.unpublishEntry({ appId, id: y.id });
    await cms.updateEntry({ appId, id: x.id, data: { title: "X3" } });
    const got = await nChanges(c2, "r", 4);
    // nothing twice: the live changes after the replay, the cursors all new
    expect(got.map((m) => m.op)).toEqual(["update", "publish", "unpublish", "update"]);
    expect(new Set([first!.cursor, ...got.map((m) => m.cursor)]).size).toBe(5);

    const c3 = await client(dev.token);
    await subscribe(c3, "r", { kind: "cms", content_type: "article" }, "not-a-cursor");
    expect(await c3.next((m) => m.type === "resync" && m.id === "r")).toEqual({ type: "resync", id: "r" });
  });
});

describe("CMS subscriptions over SSE", () => {
  it("streams a content type's changes with their cursors as event ids, resumed by Last-Event-ID", async () => {
    const dev = await s.register(appKey);
    const first = await sse("/api/realtime/sse?cms=person", dev.token);
    await first.until((t) => t.includes("event: subscribed"));
    const p = await cms.createEntry({ appId, contentType: "person", publish: true, data: { name: "Cy" } });
    const t1 = await first.until((t) => t.includes("event: change"));
    first.close();
    expect(t1).toMatch(/event: subscribed\ndata: \{"type":"subscribed","id":"sse","topic":\{"kind":"cms","content_type":"person"\}\}/);
    const id = /event: change\nid: (\S+)\n/.exec(t1)![1]!;
    await cms.updateEntry({ appId, id: p.id, data: { name: "Cy 2" } });
    const again = await sse("/api/realtime/sse?cms=person", dev.token, { "last-event-id": id });
    const t2 = await again.until((t) => t.includes("event: change"));
    again.close();
    const frames = t2.split("\n\n").filter((f) => f.startsWith("event: change"));
    expect(frames).toHaveLength(1);
    expect(JSON.parse(frames[0]!.split("data: ")[1]!)).toMatchObject({ op: "update", content_type: "person", entry: { id: p.id, name: "Cy 2" } });
  });
});

async function sse(path: string, token: string, headers: Record<string, string> = {}): Promise<{ until(p: (text: string) => boolean): Promise<string>; close(): void }> {
  const ac = new AbortController();
  const res = await fetch(`${s.httpsUrl}${path}`, { headers: { authorization: `Bearer ${token}`, ...headers }, dispatcher, signal: ac.signal });
  expect(res.status).toBe(200);
  let text = "";
  const waiters: Array<{ p: (t: string) => boolean; resolve: (t: string) => void }> = [];
  const dec = new TextDecoder();
  void (async () => {
    try {
      for await (const chunk of res.body!) {
        text += dec.decode(chunk as Uint8Array, { stream: true });
        for (const w of [...waiters]) {
          if (!w.p(text)) continue;
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(text);
        }
      }
    } catch {
      // aborted
    }
  })();
  return {
    until: (p) => (p(text) ? Promise.resolve(text) : new Promise((resolve) => waiters.push({ p, resolve }))),
    close: () => ac.abort(),
  };
}

describe("the Connect stream (RealtimeService.Subscribe)", () => {
  function streamClient(token: string): Client<typeof RealtimeService> {
    const transport = createConnectTransport({
      baseUrl: s.httpsUrl,
      httpVersion: "1.1",
      nodeOptions: { rejectUnauthorized: false },
      interceptors: [(next) => (req) => {
        req.header.set("authorization", `Bearer ${token}`);
        return next(req);
      }],
    });
    return createClient(RealtimeService, transport);
  }

  /** The stream's events as JSON, read until `done` says so. */
  async function readUntil(it: AsyncIterator<RealtimeEvent>, done: (e: Record<string, unknown>) => boolean): Promise<Array<Record<string, unknown>>> {
    const out: Array<Record<string, unknown>> = [];
    for (;;) {
      const r = await it.next();
      if (r.done) throw new Error(`stream ended after ${JSON.stringify(out)}`);
      const e = toJson(RealtimeEventSchema, r.value) as Record<string, unknown>;
      if (e.heartbeat) continue;
      out.push(e);
      if (done(e)) return out;
    }
  }

  it("streams a table's changes", async () => {
    const a = await s.createApp("rt-stream");
    const dbs = s.adminClient(AdminDatabaseService);
    const db = await dbs.createDatabase({ teamId: a.teamId, name: "rt-stream" });
    await dbs.linkDatabase({ databaseId: db.id, appId: a.appId });
    await s.adminClient(SqlService).runSql({ appId: a.appId, sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)" });
    const dev = await s.register(a.appKey);
    const abort = new AbortController();
    const it = streamClient(dev.token).subscribe({ topic: { kind: { case: "table", value: { table: "notes" } } } }, { signal: abort.signal })[Symbol.asyncIterator]();
    expect(await readUntil(it, (e) => !!e.subscribed)).toEqual([{ subscribed: { topic: { table: { table: "notes" } } } }]);
    const res = await s.fetch("/api/db/query", {
      method: "POST",
      headers: { authorization: `Bearer ${dev.token}`, "content-type": "application/json" },
      body: JSON.stringify({ sql: "INSERT INTO notes (id, body) VALUES (1, 'hi')" }),
    });
    expect(res.status).toBe(200);
    const [change] = await readUntil(it, (e) => !!e.change);
    expect(change).toEqual({ change: { op: "insert", table: "notes", row: { id: 1, body: "hi" }, cursor: expect.any(String), at: expect.any(String) } });
    abort.abort();
  });

  it("streams a content type's changes, resumable, and refuses an unknown content type", async () => {
    const dev = await s.register(appKey);
    const rt = streamClient(dev.token);
    const abort = new AbortController();
    const it = rt.subscribe({ topic: { kind: { case: "cms", value: { contentType: "article" } } } }, { signal: abort.signal })[Symbol.asyncIterator]();
    expect(await readUntil(it, (e) => !!e.subscribed)).toEqual([{ subscribed: { topic: { cms: { contentType: "article" } } } }]);
    const z = await cms.createEntry({ appId, contentType: "article", publish: true, data: { title: "Z" } });
    const [pub] = await readUntil(it, (e) => !!e.change);
    expect(pub).toEqual({ change: { op: "publish", contentType: "article", entry: await readApi("article", z.id), cursor: expect.any(String), at: expect.any(String) } });
    abort.abort();

    await cms.unpublishEntry({ appId, id: z.id });
    const again = new AbortController();
    const it2 = rt.subscribe({ topic: { kind: { case: "cms", value: { contentType: "article" } } }, resume: (pub!.change as Msg).cursor as string }, { signal: again.signal })[Symbol.asyncIterator]();
    const got = await readUntil(it2, (e) => !!e.change);
    expect(got.at(-1)).toEqual({ change: { op: "unpublish", contentType: "article", entry: { id: z.id }, cursor: expect.any(String), at: expect.any(String) } });
    again.abort();

    await expect(async () => {
      for await (const _ of rt.subscribe({ topic: { kind: { case: "cms", value: { contentType: "nope" } } } })) void _;
    }).rejects.toMatchObject({ rawMessage: expect.stringContaining("nope") });
  });
});
