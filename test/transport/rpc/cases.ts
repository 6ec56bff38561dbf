// The conformance test's cases, by method ("pulsebase.x.v1.Service/Method"):
// a success case where one can be made, and error cases (validation with
// field violations, not_found, the method's own refusals). Every served
// unary method must have an entry: the test fails on a method without one.
//
// Requests are proto3 JSON built from a server's fixture (its ids differ
// from the other server's); `prepare` makes a fresh resource per send (on
// each server, in lockstep) for cases that use it up (delete, rotate, ...).
// Reads go to the "stable" app and team, which only the seed writes;
// mutations go to the "scratch" ones, so cases running at once cannot
// change what another case reads.
import type { JsonValue } from "@bufbuild/protobuf";

export interface Fx {
  teamId: string;
  appId: string;
  appKey: string;
  /** A consumer of the stable app and its token. */
  consumerId: string;
  deviceId: string;
  /** A consumer whose sessions only the seed makes (one ended, one open). */
  listedConsumerId: string;
  token: string;
  sessionId: string;
  dbId: string;
  /** The function behind the "echo" trigger (device Invoke) and a quiet one for operator reads. */
  echoFnId: string;
  readerFnId: string;
  scheduleTriggerId: string;
  entryId: string;
  mediaId: string;
  eventId: string;
  logId: string;
  breadcrumbId: string;
  quietTeamId: string;
  scratchTeamId: string;
  scratchAppId: string;
  scratchAppKey: string;
  scratchFnId: string;
  /** A function of the scratch app that stores the kv key in its payload. */
  scratchKvFnId: string;
  [k: string]: string;
}

/** What a case's `prepare` may do on one server (the admin API, over connect-node's client). */
export interface Prep {
  fx: Fx;
  /** A number shared by both servers' sends of one case (for unique names). */
  n: number;
  admin(path: string, body: JsonValue): Promise<Record<string, JsonValue>>;
  /** Registers a consumer with this device id over REST. */
  registerConsumer(appKey: string, deviceId: string): Promise<{ id: string; token: string }>;
  /** A device call with the stable consumer's token. */
  device(path: string, body: JsonValue): Promise<Record<string, JsonValue>>;
}

export interface Case {
  name: string;
  /** The outcome connect-node gives ("ok" or a code); undefined: compared only. */
  expect?: string;
  req(fx: Fx, extra: Record<string, string>): JsonValue;
  prepare?(p: Prep): Promise<Record<string, string>>;
  /** A deliberately slow call: sent only with a deadline it cannot meet. */
  slow?: boolean;
  /**
   * Costly on the server (index builds, password hashing, new database
   * files), as is every case with a `prepare`: sent plain, over one HTTP
   * version per protocol; the variants go to the method's next case.
   */
  heavy?: boolean;
}

export type Auth = "consumer" | "app-key" | "none" | "operator";

const ok = (req: Case["req"], prepare?: Case["prepare"], name = "ok"): Case => ({ name, expect: "ok", req, prepare });
const err = (name: string, expect: string | undefined, req: Case["req"], prepare?: Case["prepare"]): Case => ({ name, expect, req, prepare });
const heavy = (c: Case): Case => ({ ...c, heavy: true });
const NO_ID = "999999999";
const b64 = (s: string) => Buffer.from(s).toString("base64");

/** Code of the seed's functions: echo answers the request; kv stores a key; slow busy-waits. */
export const FN_CODE = {
  echo: "export default async function (req, ctx) { return { status: 200, body: { method: req.method, body: req.body, consumer: ctx.consumer ? 'yes' : 'no' } }; }",
  slow: "export default function () { const end = Date.now() + 400; while (Date.now() < end) {} return { late: true }; }",
  kv: "export default async function (req, ctx) { await ctx.kv.put(req?.key ?? 'greeting', 'hello'); return { stored: true }; }",
};

// Fresh resources, per send.
const freshApp = async (p: Prep) => ({ appId: String((await p.admin("/pulsebase.admin.v1.IdentityService/CreateApp", { teamId: p.fx.scratchTeamId, name: `fresh ${p.n}` })).id) });
const freshFn = async (p: Prep) => ({ fnId: String((await p.admin("/pulsebase.admin.v1.FunctionService/CreateFunction", { appId: p.fx.scratchAppId, name: `fresh-${p.n}`, code: FN_CODE.echo })).id) });
const freshDb = async (p: Prep) => ({ dbId: String((await p.admin("/pulsebase.admin.v1.DatabaseService/CreateDatabase", { teamId: p.fx.scratchTeamId, name: `fresh-${p.n}` })).id) });
const freshEntry = async (p: Prep) => ({ entryId: String((await p.admin("/pulsebase.admin.v1.CmsService/CreateEntry", { appId: p.fx.scratchAppId, contentType: "note", data: { title: `fresh ${p.n}` } })).id) });
const freshType = async (p: Prep) => {
  await p.admin("/pulsebase.admin.v1.CmsService/CreateContentType", { appId: p.fx.scratchAppId, contentType: { slug: `fresh${p.n}`, name: "Fresh", fields: [{ name: "title", type: "text" }] } });
  return { slug: `fresh${p.n}` };
};
/** A fresh app of the scratch team with a linked database holding table t (id INTEGER PRIMARY KEY, v TEXT) and its row 1. */
const freshTable = async (p: Prep) => {
  const { appId } = await freshApp(p);
  const { dbId } = await freshDb(p);
  await p.admin("/pulsebase.admin.v1.DatabaseService/LinkDatabase", { databaseId: dbId, appId });
  await p.admin("/pulsebase.admin.v1.SqlService/RunSql", { appId, sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t (id, v) VALUES (1, 'first')" });
  return { appId };
};
/** A team whose owner and one more member are new users; the member is `userId`. */
const freshTeam = async (p: Prep) => {
  const user = async (who: string) => String((await p.admin("/pulsebase.admin.v1.IdentityService/CreateUser", { name: who, email: `${who}${p.n}@example.org` })).id);
  const owner = await user("owner");
  const member = await user("member");
  const team = await p.admin("/pulsebase.admin.v1.IdentityService/CreateTeam", { name: `team ${p.n}`, memberUserIds: [owner, member] });
  return { teamId: String(team.id), userId: member };
};
const freshInvitation = async (p: Prep) => ({
  token: String((await p.admin("/pulsebase.admin.v1.AccountService/CreateInvitation", { teamId: p.fx.scratchTeamId, email: `invited${p.n}@example.org`, role: 2 })).token),
});
const freshTrigger = async (p: Prep) => ({
  triggerId: String((await p.admin("/pulsebase.admin.v1.FunctionService/CreateHttpTrigger", { functionId: p.fx.scratchFnId, slug: `trig-${p.n}`, enabled: true, auth: "signed", signingSecret: "whsec_0123456789abcdef" })).id),
});

export const DEVICE: Record<string, { auth: Auth; cases: Case[] }> = {
  "pulsebase.platform.v1.AnalyticsService/RecordEvent": {
    auth: "consumer",
    cases: [ok(() => ({ name: "purchase", metadata: { sku: "a1", qty: "2" } })), err("invalid", "invalid_argument", () => ({ name: "" }))],
  },
  "pulsebase.platform.v1.AnalyticsService/BatchEvents": {
    auth: "consumer",
    cases: [ok((fx) => ({ events: [{ name: "batched", metadata: { sku: "b2" }, sessionId: fx.sessionId }, { name: "open", metadata: { sku: "c3" }, sessionId: fx.sessionId }] })), err("invalid", "invalid_argument", () => ({ events: [{ name: "ok" }, { name: "" }] }))],
  },
  "pulsebase.platform.v1.AnalyticsService/RecordLog": {
    auth: "consumer",
    cases: [
      ok(() => ({ classFQN: "com.example.Crash", message: "boom", type: "error", appVersion: "1.0.0", lineNumber: "42", context: { screen: "home" } })),
      err("invalid", "invalid_argument", () => ({ message: "no class" })),
    ],
  },
  "pulsebase.platform.v1.AnalyticsService/BatchLogs": {
    auth: "consumer",
    cases: [ok((fx) => ({ logs: [{ classFQN: "com.example.Batched", message: "boom", type: "error", appVersion: "1.0.0", sessionId: fx.sessionId }] })), err("invalid", "invalid_argument", () => ({ logs: [{ classFQN: "" }] }))],
  },
  "pulsebase.platform.v1.AnalyticsService/RecordBreadcrumb": {
    auth: "consumer",
    cases: [ok(() => ({ name: "tap" })), err("invalid", "invalid_argument", () => ({ name: "", createdAt: "yesterday" }))],
  },
  "pulsebase.platform.v1.AnalyticsService/BatchBreadcrumbs": {
    auth: "consumer",
    cases: [ok(() => ({ breadcrumbs: [{ name: "batched-tap" }, { name: "scroll" }] })), err("invalid", "invalid_argument", () => ({ breadcrumbs: [{ name: "" }] }))],
  },
  "pulsebase.platform.v1.RealtimeService/Broadcast": {
    auth: "consumer",
    cases: [ok(() => ({ channel: "room:1", event: "msg", payload: { text: "hi" } })), err("invalid", "invalid_argument", () => ({ channel: "no spaces", event: "msg" }))],
  },
  "pulsebase.platform.v1.ConsumerService/CreateConsumer": {
    auth: "none",
    cases: [
      {
        name: "ok",
        expect: "ok",
        // A device id per send (registering twice is an update, not a create).
        prepare: async (p) => ({ deviceId: `conf-${p.n}` }),
        req: (fx, x) => ({ appKey: fx.scratchAppKey, deviceId: x.deviceId!, deviceModel: "Pixel 9", userId: "u1", os: "android", country: "DE", language: "de" }),
      },
      err("invalid", "invalid_argument", (fx) => ({ appKey: fx.scratchAppKey, deviceId: "", country: "XX", language: "klingon" })),
      err("unknown-app", undefined, () => ({ appKey: "no-such-app-key", deviceId: "d1", deviceModel: "m", os: "android", country: "DE", language: "de" })),
    ],
  },
  "pulsebase.platform.v1.ConsumerService/UpdateConsumer": {
    auth: "consumer",
    cases: [ok((fx) => ({ id: fx.consumerId, country: "FR", language: "fr" })), err("invalid", "invalid_argument", (fx) => ({ id: fx.consumerId, country: "ZZZ" })), err("other", undefined, () => ({ id: NO_ID, country: "FR" }))],
  },
  "pulsebase.platform.v1.ConsumerService/IssueToken": {
    auth: "none",
    cases: [
      // A consumer per send: tokens are limited per consumer (token-issue-limiter.ts).
      ok((fx, x) => ({ appKey: fx.scratchAppKey, consumerId: x.consumerId!, deviceId: `issue-${x.n}` }), async (p) => ({ consumerId: (await p.registerConsumer(p.fx.scratchAppKey, `issue-${p.n}`)).id })),
      // (An unknown consumer is not charged to any consumer's limit.)
      err("unknown-consumer", undefined, (fx) => ({ appKey: fx.appKey, consumerId: NO_ID, deviceId: "some-device" })),
      err("invalid", "invalid_argument", () => ({ appKey: "" })),
    ],
  },
  "pulsebase.platform.v1.DatabaseService/Query": {
    auth: "consumer",
    cases: [
      // Over 1 KiB: the compressed answers are compressed.
      ok(() => ({ sql: "SELECT id, name FROM items ORDER BY id", params: [] })),
      ok(() => ({ sql: "SELECT name FROM items WHERE id = ?", params: [7] }), undefined, "ok-param"),
      err("invalid", "invalid_argument", () => ({ sql: "" })),
      err("forbidden", undefined, () => ({ sql: "ATTACH DATABASE 'x' AS y" })),
      err("query-error", undefined, () => ({ sql: "SELECT * FROM no_such_table" })),
      // A leading U+FEFF is text (issue #28): the statement the guard sees is the one sent, on every protocol.
      err("bom-sql", undefined, () => ({ sql: "\uFEFFSELECT 1" })),
    ],
  },
  "pulsebase.platform.v1.DatabaseService/Batch": {
    auth: "consumer",
    cases: [
      ok(() => ({ statements: [{ sql: "SELECT count(*) AS n FROM items", params: [] }, { sql: "SELECT name FROM items WHERE id = ?", params: [3] }], transaction: true })),
      err("invalid", "invalid_argument", () => ({ statements: [] })),
    ],
  },
  "pulsebase.platform.v1.FunctionService/Invoke": {
    auth: "consumer",
    cases: [
      ok(() => ({ method: "POST", pathParams: { slug: "echo" }, body: b64('{"hello":"world"}'), contentType: "application/json", headers: { "x-thing": "1" } })),
      err("not-found", "not_found", () => ({ method: "POST", pathParams: { slug: "nope" } })),
      // "\uFEFFDELETE" is no method the trigger takes, whatever the protocol (issue #28).
      err("bom-method", undefined, () => ({ method: "\uFEFFDELETE", pathParams: { slug: "echo" } })),
      { name: "slow", slow: true, req: () => ({ method: "GET", pathParams: { slug: "slow" } }) },
    ],
  },
  "pulsebase.platform.v1.FunctionService/InvokePublic": {
    auth: "none",
    cases: [
      ok((fx) => ({ method: "GET", pathParams: { app_key: fx.appKey, slug: "pub" }, query: { a: "1" } })),
      err("consumer-trigger", "not_found", (fx) => ({ method: "GET", pathParams: { app_key: fx.appKey, slug: "echo" } })),
      err("unknown-app", undefined, () => ({ method: "GET", pathParams: { app_key: "nope", slug: "pub" } })),
    ],
  },
  "pulsebase.platform.v1.SessionService/StartSession": { auth: "consumer", cases: [ok(() => ({}))] },
  "pulsebase.platform.v1.SessionService/EndSession": {
    auth: "consumer",
    cases: [ok((_fx, x) => ({ sessionId: x.sessionId! }), async (p) => ({ sessionId: String((await p.device("/pulsebase.platform.v1.SessionService/StartSession", {})).sessionId) })), err("not-found", "not_found", () => ({ sessionId: NO_ID })), err("invalid", "invalid_argument", (fx) => ({ sessionId: fx.sessionId, timestamp: "noon" }))],
  },
  "pulsebase.platform.v1.SessionService/BatchSessions": {
    auth: "consumer",
    cases: [
      ok(() => ({ sessions: [{ startedAt: "2026-01-02T03:04:05Z", endedAt: "2026-01-02T03:14:05Z" }] })),
      err("invalid", "invalid_argument", () => ({ sessions: [{ startedAt: "bad", endedAt: "2026-01-02T03:14:05Z" }] })),
    ],
  },
  "pulsebase.cms.v1.ContentService/ListSchemas": { auth: "app-key", cases: [ok(() => ({}))] },
  "pulsebase.cms.v1.ContentService/GetSchema": {
    auth: "app-key",
    cases: [ok(() => ({ contentType: "note" })), err("not-found", "not_found", () => ({ contentType: "nope" }))],
  },
  "pulsebase.cms.v1.ContentService/SearchEntries": {
    auth: "app-key",
    cases: [ok(() => ({ contentType: "note", query: { q: "hello" } })), err("invalid", undefined, () => ({ contentType: "note", query: { q: "" } }))],
  },
  "pulsebase.cms.v1.ContentService/ListEntries": {
    auth: "app-key",
    cases: [
      ok(() => ({ contentType: "note", query: { sort: "-stars", "filter[stars][gte]": "1", per_page: "5" } })),
      err("bad-sort", "invalid_argument", () => ({ contentType: "note", query: { sort: "nope" } })),
      err("not-found", "not_found", () => ({ contentType: "nope" })),
    ],
  },
  "pulsebase.cms.v1.ContentService/GetEntry": {
    auth: "app-key",
    cases: [ok((fx) => ({ contentType: "note", uuid: fx.entryId })), err("not-found", "not_found", () => ({ contentType: "note", uuid: "00000000-0000-4000-8000-000000000000" }))],
  },
  "grpc.health.v1.Health/Check": {
    auth: "none",
    cases: [ok(() => ({ service: "" })), err("not-found", "not_found", () => ({ service: "no.such.Service" }))],
  },
};

const op = (cases: Case[]) => ({ auth: "operator" as const, cases });
const none = (cases: Case[]) => ({ auth: "none" as const, cases });

export const ADMIN: Record<string, { auth: Auth; cases: Case[] }> = {
  "grpc.health.v1.Health/Check": { auth: "none", cases: [ok(() => ({ service: "pulsebase.admin.v1.IdentityService" }))] },
  // AccountService: the operator token stands for an operator in every team (docs/console.md).
  // Without credentials by design: the setup page, sign-in and invitation links.
  "pulsebase.admin.v1.AccountService/GetSetupStatus": { auth: "none", cases: [ok(() => ({}))] },
  "pulsebase.admin.v1.AccountService/CompleteSetup": none([heavy(err("bad-token", undefined, () => ({ setupToken: "wrong", name: "A", email: "a@example.org", password: "correct horse battery staple", teamName: "T" })))]),
  "pulsebase.admin.v1.AccountService/Login": none([
    // An account per send: failed attempts lock an account (login-limiter.ts).
    err("invalid", undefined, (_fx, x) => ({ email: `not an email ${x.n}`, password: "" })),
    heavy(err("bad-password", undefined, (_fx, x) => ({ email: `nobody${x.n}@example.org`, password: "not the password" }))),
  ]),
  "pulsebase.admin.v1.AccountService/Logout": op([err("operator", undefined, () => ({}))]),
  "pulsebase.admin.v1.AccountService/LogoutEverywhere": op([err("operator", undefined, () => ({}))]),
  "pulsebase.admin.v1.AccountService/GetMe": op([err("operator", undefined, () => ({}))]),
  "pulsebase.admin.v1.AccountService/ListMembers": op([ok((fx) => ({ teamId: fx.quietTeamId })), err("not-found", undefined, () => ({ teamId: NO_ID }))]),
  "pulsebase.admin.v1.AccountService/SetMemberRole": op([
    ok((_fx, x) => ({ teamId: x.teamId!, userId: x.userId!, role: 3 }), freshTeam),
    err("not-found", undefined, (fx) => ({ teamId: fx.scratchTeamId, userId: NO_ID, role: 2 })),
  ]),
  "pulsebase.admin.v1.AccountService/RemoveMember": op([ok((_fx, x) => ({ teamId: x.teamId!, userId: x.userId! }), freshTeam), err("not-found", undefined, (fx) => ({ teamId: fx.scratchTeamId, userId: NO_ID }))]),
  "pulsebase.admin.v1.AccountService/CreateInvitation": op([
    ok((fx, x) => ({ teamId: fx.scratchTeamId, email: `invite${x.n}@example.org`, role: 2 }), async (p) => ({ n: String(p.n) })),
    err("invalid", "invalid_argument", (fx) => ({ teamId: fx.scratchTeamId, email: "nope", role: 0 })),
  ]),
  "pulsebase.admin.v1.AccountService/ListInvitations": op([ok((fx) => ({ teamId: fx.quietTeamId }))]),
  "pulsebase.admin.v1.AccountService/RevokeInvitation": op([
    ok((fx, x) => ({ teamId: fx.scratchTeamId, invitationId: x.invitationId! }), async (p) => ({
      invitationId: String((await p.admin("/pulsebase.admin.v1.AccountService/CreateInvitation", { teamId: p.fx.scratchTeamId, email: `revoke${p.n}@example.org`, role: 2 })).id),
    })),
    err("not-found", "not_found", (fx) => ({ teamId: fx.scratchTeamId, invitationId: NO_ID })),
  ]),
  "pulsebase.admin.v1.AccountService/GetInvitation": none([ok((_fx, x) => ({ token: x.token! }), freshInvitation), err("not-found", undefined, () => ({ token: "no-such-invitation-token" }))]),
  "pulsebase.admin.v1.AccountService/AcceptInvitation": none([
    heavy(ok((_fx, x) => ({ token: x.token!, name: "Invited", password: "correct horse battery staple" }), freshInvitation)),
    err("not-found", undefined, () => ({ token: "no-such-invitation-token", name: "N", password: "correct horse battery staple" })),
  ]),
  // freshTeam's users are made by CreateUser: no password yet.
  "pulsebase.admin.v1.AccountService/CreatePasswordLink": op([
    ok((_fx, x) => ({ teamId: x.teamId!, userId: x.userId! }), freshTeam),
    err("not-found", "not_found", (fx) => ({ teamId: fx.scratchTeamId, userId: NO_ID })),
  ]),
  "pulsebase.admin.v1.AccountService/SetPassword": none([
    heavy(ok((_fx, x) => ({ token: x.token!, password: "correct horse battery staple" }), async (p) => {
      const { teamId, userId } = await freshTeam(p);
      return { token: String((await p.admin("/pulsebase.admin.v1.AccountService/CreatePasswordLink", { teamId, userId })).token) };
    })),
    err("not-found", "not_found", () => ({ token: "no-such-link-token", password: "correct horse battery staple" })),
  ]),
  "pulsebase.admin.v1.AccountService/ListAuditLog": op([ok((fx) => ({ teamId: fx.quietTeamId, pageSize: 10 })), err("invalid", undefined, (fx) => ({ teamId: fx.quietTeamId, pageToken: "garbage!" }))]),

  "pulsebase.admin.v1.AnalyticsService/ListEvents": op([ok((fx) => ({ filter: { appId: fx.appId } })), err("invalid", "invalid_argument", (fx) => ({ filter: { appId: fx.appId, pageSize: 100000 } }))]),
  "pulsebase.admin.v1.AnalyticsService/GetEvent": op([ok((fx) => ({ id: fx.eventId })), err("not-found", "not_found", () => ({ id: NO_ID }))]),
  "pulsebase.admin.v1.AnalyticsService/GetEventBreakdown": op([ok((fx) => ({ eventId: fx.eventId, from: "2020-01-01T00:00:00Z", to: "2020-01-03T00:00:00Z" })), err("invalid", undefined, (fx) => ({ eventId: fx.eventId }))]),
  "pulsebase.admin.v1.RealtimeAdminService/ListChannels": op([ok((fx) => ({ appId: fx.appId }))]),
  "pulsebase.admin.v1.RealtimeAdminService/InspectChannel": op([ok((fx) => ({ appId: fx.appId, channel: "room:1" })), err("invalid", "invalid_argument", (fx) => ({ appId: fx.appId, channel: "no spaces" }))]),
  "pulsebase.admin.v1.RealtimeAdminService/SetChannelAccess": op([
    ok((fx) => ({ appId: fx.scratchAppId, entries: [{ pattern: "user:*", mode: "rule", rule: ":channel = 'user:' || :user_id" }, { pattern: "*", mode: "any", rule: "" }] })),
    err("bad-rule", "invalid_argument", (fx) => ({ appId: fx.scratchAppId, entries: [{ pattern: "room:*", mode: "rule", rule: "(SELECT count(*) FROM sqlite_schema) > 0" }] })),
  ]),
  "pulsebase.admin.v1.RealtimeAdminService/GetChannelAccess": op([ok((fx) => ({ appId: fx.appId }))]),
  "pulsebase.admin.v1.OverviewService/GetOverview": op([ok((fx) => ({ teamId: fx.quietTeamId })), err("not-found", undefined, () => ({ teamId: NO_ID }))]),
  "pulsebase.admin.v1.AnalyticsService/GetEventDailyCounts": op([ok((fx) => ({ eventId: fx.eventId, from: "2020-01-01T00:00:00Z", to: "2020-01-03T00:00:00Z" })), err("not-found", undefined, () => ({ eventId: NO_ID }))]),
  "pulsebase.admin.v1.AnalyticsService/ListLogs": op([ok((fx) => ({ filter: { appId: fx.appId } }))]),
  "pulsebase.admin.v1.AnalyticsService/GetLog": op([ok((fx) => ({ id: fx.logId })), err("not-found", "not_found", () => ({ id: NO_ID }))]),
  "pulsebase.admin.v1.AnalyticsService/ListLogOccurrences": op([ok((fx) => ({ logId: fx.logId, pageSize: 5 })), err("invalid", undefined, (fx) => ({ logId: fx.logId, pageToken: "garbage!" }))]),
  "pulsebase.admin.v1.AnalyticsService/GetLogAttachment": op([err("not-found", "not_found", () => ({ occurrenceId: NO_ID }))]),
  "pulsebase.admin.v1.AnalyticsService/ListBreadcrumbs": op([ok((fx) => ({ filter: { appId: fx.appId } }))]),
  "pulsebase.admin.v1.AnalyticsService/ListBreadcrumbOccurrences": op([ok((fx) => ({ breadcrumbId: fx.breadcrumbId, pageSize: 5 })), err("not-found", undefined, () => ({ breadcrumbId: NO_ID }))]),
  "pulsebase.admin.v1.AnalyticsService/GetQueueStats": op([ok(() => ({}))]),
  "pulsebase.admin.v1.AnalyticsService/ListDeadLetters": op([ok(() => ({ pageSize: 5 }))]),
  "pulsebase.admin.v1.AnalyticsService/ReplayDeadLetters": op([err("unknown-ids", undefined, () => ({ ids: [NO_ID] }))]),

  "pulsebase.admin.v1.CmsService/CreateContentType": op([
    heavy(ok((fx, x) => ({ appId: fx.scratchAppId, contentType: { slug: `made${x.n}`, name: "Made", fields: [{ name: "title", type: "text", required: true }], sortableFields: [] } }), async (p) => ({ n: String(p.n) }))),
    err("invalid", "invalid_argument", (fx) => ({ appId: fx.scratchAppId, contentType: { slug: "Bad Slug!", name: "", fields: [{ name: "x", type: "no-such-type" }] } })),
  ]),
  "pulsebase.admin.v1.CmsService/UpdateContentType": op([
    heavy(ok((fx, x) => ({ appId: fx.scratchAppId, slug: x.slug!, contentType: { slug: x.slug!, name: "Renamed", fields: [{ name: "title", type: "text" }, { name: "n", type: "number" }] } }), freshType)),
    err("not-found", "not_found", (fx) => ({ appId: fx.scratchAppId, slug: "nope", contentType: { slug: "nope", name: "N" } })),
  ]),
  "pulsebase.admin.v1.CmsService/DeleteContentType": op([heavy(ok((fx, x) => ({ appId: fx.scratchAppId, slug: x.slug! }), freshType)), err("not-found", "not_found", (fx) => ({ appId: fx.scratchAppId, slug: "nope" }))]),
  "pulsebase.admin.v1.CmsService/GetContentType": op([ok((fx) => ({ appId: fx.appId, slug: "note" })), err("not-found", "not_found", (fx) => ({ appId: fx.appId, slug: "nope" }))]),
  "pulsebase.admin.v1.CmsService/ListContentTypes": op([ok((fx) => ({ appId: fx.appId })), err("not-found", undefined, () => ({ appId: NO_ID }))]),
  "pulsebase.admin.v1.CmsService/CreateEntry": op([
    ok((fx) => ({ appId: fx.scratchAppId, contentType: "note", data: { title: "made", stars: 2 }, publish: true })),
    err("invalid", "invalid_argument", (fx) => ({ appId: fx.scratchAppId, contentType: "note", data: { stars: "many" } })),
  ]),
  "pulsebase.admin.v1.CmsService/UpdateEntry": op([ok((fx, x) => ({ appId: fx.scratchAppId, id: x.entryId!, data: { title: "updated", stars: 5 } }), freshEntry), err("not-found", "not_found", (fx) => ({ appId: fx.scratchAppId, id: "00000000-0000-4000-8000-000000000000", data: { title: "x" } }))]),
  "pulsebase.admin.v1.CmsService/DeleteEntry": op([ok((fx, x) => ({ appId: fx.scratchAppId, id: x.entryId! }), freshEntry), err("not-found", "not_found", (fx) => ({ appId: fx.scratchAppId, id: "00000000-0000-4000-8000-000000000000" }))]),
  "pulsebase.admin.v1.CmsService/PublishEntry": op([ok((fx, x) => ({ appId: fx.scratchAppId, id: x.entryId! }), freshEntry), err("not-found", "not_found", (fx) => ({ appId: fx.scratchAppId, id: "00000000-0000-4000-8000-000000000000" }))]),
  "pulsebase.admin.v1.CmsService/UnpublishEntry": op([ok((fx, x) => ({ appId: fx.scratchAppId, id: x.entryId! }), freshEntry), err("not-found", "not_found", (fx) => ({ appId: fx.scratchAppId, id: "00000000-0000-4000-8000-000000000000" }))]),
  "pulsebase.admin.v1.CmsService/GetEntry": op([ok((fx) => ({ appId: fx.appId, id: fx.entryId })), err("not-found", "not_found", (fx) => ({ appId: fx.appId, id: "00000000-0000-4000-8000-000000000000" }))]),
  "pulsebase.admin.v1.CmsService/ListEntries": op([ok((fx) => ({ appId: fx.appId, contentType: "note", pageSize: 10 })), err("not-found", undefined, (fx) => ({ appId: fx.appId, contentType: "nope" }))]),
  "pulsebase.admin.v1.CmsService/UploadMedia": op([
    ok((fx) => ({ appId: fx.scratchAppId, filename: "hello.txt", contentType: "text/plain", data: b64("hello media") })),
    err("invalid", "invalid_argument", (fx) => ({ appId: fx.scratchAppId, filename: "", contentType: "", data: "" })),
  ]),
  "pulsebase.admin.v1.CmsService/ListMedia": op([ok((fx) => ({ appId: fx.appId, pageSize: 10 }))]),
  "pulsebase.admin.v1.CmsService/DeleteMedia": op([
    heavy(ok((fx, x) => ({ appId: fx.scratchAppId, fileId: x.fileId! }), async (p) => ({
      fileId: String((await p.admin("/pulsebase.admin.v1.CmsService/UploadMedia", { appId: p.fx.scratchAppId, filename: "gone.txt", contentType: "text/plain", data: b64("bye") })).fileId),
    }))),
    err("not-found", "not_found", (fx) => ({ appId: fx.scratchAppId, fileId: "00000000-0000-4000-8000-000000000000" })),
  ]),
  "pulsebase.admin.v1.CmsService/GetCmsUsage": op([ok((fx) => ({ appId: fx.appId, fromDay: "2020-01-01", toDay: "2020-01-07" })), err("invalid", "invalid_argument", (fx) => ({ appId: fx.appId, fromDay: "first of May" }))]),

  "pulsebase.admin.v1.DatabaseService/CreateDatabase": op([
    heavy(ok((fx, x) => ({ teamId: fx.scratchTeamId, name: `made-${x.n}` }), async (p) => ({ n: String(p.n) }))),
    err("invalid", "invalid_argument", (fx) => ({ teamId: fx.scratchTeamId, name: "", kind: "DATABASE_KIND_REMOTE", url: "ftp://x" })),
  ]),
  "pulsebase.admin.v1.DatabaseService/ProvisionDatabase": op([err("not-found", "not_found", () => ({ id: NO_ID })), err("stable", undefined, (fx) => ({ id: fx.dbId }))]),
  "pulsebase.admin.v1.DatabaseService/GetDatabase": op([ok((fx) => ({ id: fx.dbId })), err("not-found", "not_found", () => ({ id: NO_ID }))]),
  "pulsebase.admin.v1.DatabaseService/ListDatabases": op([ok((fx) => ({ teamId: fx.teamId }))]),
  "pulsebase.admin.v1.DatabaseService/LinkDatabase": op([
    heavy(ok((_fx, x) => ({ databaseId: x.dbId!, appId: x.appId! }), async (p) => ({ ...(await freshDb(p)), ...(await freshApp(p)) }))),
    err("not-found", "not_found", (fx) => ({ databaseId: NO_ID, appId: fx.scratchAppId })),
  ]),
  "pulsebase.admin.v1.DatabaseService/UnlinkDatabase": op([
    heavy(ok((_fx, x) => ({ databaseId: x.dbId!, appId: x.appId! }), async (p) => {
      const ids = { ...(await freshDb(p)), ...(await freshApp(p)) };
      await p.admin("/pulsebase.admin.v1.DatabaseService/LinkDatabase", { databaseId: ids.dbId, appId: ids.appId });
      return ids;
    })),
    err("not-linked", undefined, (fx) => ({ databaseId: fx.dbId, appId: fx.scratchAppId })),
  ]),
  "pulsebase.admin.v1.DatabaseService/SuspendDatabase": op([heavy(ok((_fx, x) => ({ id: x.dbId! }), freshDb)), err("not-found", "not_found", () => ({ id: NO_ID }))]),
  "pulsebase.admin.v1.DatabaseService/ResumeDatabase": op([
    heavy(ok((_fx, x) => ({ id: x.dbId! }), async (p) => {
      const ids = await freshDb(p);
      await p.admin("/pulsebase.admin.v1.DatabaseService/SuspendDatabase", { id: ids.dbId });
      return ids;
    })),
    err("not-found", "not_found", () => ({ id: NO_ID })),
  ]),
  "pulsebase.admin.v1.DatabaseService/DeleteDatabase": op([heavy(ok((_fx, x) => ({ id: x.dbId! }), freshDb)), err("not-found", "not_found", () => ({ id: NO_ID }))]),

  "pulsebase.admin.v1.FunctionService/CreateFunction": op([
    ok((fx, x) => ({ appId: fx.scratchAppId, name: `made-${x.n}`, code: FN_CODE.echo, timeoutMs: 2000 }), async (p) => ({ n: String(p.n) })),
    err("invalid", "invalid_argument", (fx) => ({ appId: fx.scratchAppId, name: "", code: "export default 1 +", timeoutMs: -1 })),
  ]),
  "pulsebase.admin.v1.FunctionService/GetFunction": op([ok((fx) => ({ id: fx.readerFnId })), err("not-found", "not_found", () => ({ id: NO_ID }))]),
  "pulsebase.admin.v1.FunctionService/ListFunctions": op([ok((fx) => ({ appId: fx.appId }))]),
  "pulsebase.admin.v1.FunctionService/UpdateFunctionSettings": op([
    heavy(ok((_fx, x) => ({ id: x.fnId!, timeoutMs: 3000, memoryMb: 64, invocationsPerMinute: 100 }), freshFn)),
    err("invalid", "invalid_argument", (fx) => ({ id: fx.scratchFnId, timeoutMs: 10_000_000 })),
  ]),
  "pulsebase.admin.v1.FunctionService/DeleteFunction": op([heavy(ok((_fx, x) => ({ id: x.fnId! }), freshFn)), err("not-found", "not_found", () => ({ id: NO_ID }))]),
  "pulsebase.admin.v1.FunctionService/SetSecret": op([
    heavy(ok((_fx, x) => ({ functionId: x.fnId!, name: "API_KEY", value: "s3cret" }), freshFn)),
    err("invalid", "invalid_argument", (fx) => ({ functionId: fx.scratchFnId, name: "bad name", value: "" })),
  ]),
  "pulsebase.admin.v1.FunctionService/DeleteSecret": op([
    ok((_fx, x) => ({ functionId: x.fnId!, name: "API_KEY" }), async (p) => {
      const made = await freshFn(p);
      await p.admin("/pulsebase.admin.v1.FunctionService/SetSecret", { functionId: made.fnId, name: "API_KEY", value: "s3cret" });
      return made;
    }),
    err("not-found", undefined, (fx) => ({ functionId: fx.readerFnId, name: "NOPE" })),
  ]),
  "pulsebase.admin.v1.FunctionService/DeployVersion": op([
    heavy(ok((_fx, x) => ({ functionId: x.fnId!, code: FN_CODE.kv, activate: true }), freshFn)),
    err("syntax-error", "invalid_argument", (fx) => ({ functionId: fx.scratchFnId, code: "export default function ( {" })),
  ]),
  "pulsebase.admin.v1.FunctionService/ListVersions": op([ok((fx) => ({ functionId: fx.readerFnId, includeCode: true }))]),
  "pulsebase.admin.v1.FunctionService/GetVersion": op([ok((fx) => ({ functionId: fx.readerFnId, version: 1 })), err("not-found", "not_found", (fx) => ({ functionId: fx.readerFnId, version: 99 }))]),
  "pulsebase.admin.v1.FunctionService/ActivateVersion": op([heavy(ok((_fx, x) => ({ functionId: x.fnId!, version: 1 }), freshFn)), err("not-found", "not_found", (fx) => ({ functionId: fx.readerFnId, version: 99 }))]),
  "pulsebase.admin.v1.FunctionService/CreateHttpTrigger": op([
    ok((fx, x) => ({ functionId: fx.scratchFnId, slug: `made-${x.n}`, enabled: true, auth: "consumer" }), async (p) => ({ n: String(p.n) })),
    err("invalid", "invalid_argument", (fx) => ({ functionId: fx.scratchFnId, slug: "Bad Slug", auth: "sometimes" })),
  ]),
  "pulsebase.admin.v1.FunctionService/CreateEventTrigger": op([
    // Disabled: the scratch app's entries (made by other cases) must not start runs.
    ok((fx) => ({ functionId: fx.scratchFnId, source: "cms", target: "note", operations: ["insert"], enabled: false })),
    err("invalid", "invalid_argument", (fx) => ({ functionId: fx.scratchFnId, source: "weather", target: "" })),
  ]),
  "pulsebase.admin.v1.FunctionService/CreateScheduleTrigger": op([
    ok((fx) => ({ functionId: fx.scratchFnId, cron: "0 3 * * *", timezone: "Europe/Berlin", missedTicks: "skip", enabled: false })),
    err("invalid", "invalid_argument", (fx) => ({ functionId: fx.scratchFnId, cron: "every day", timezone: "Mars/Olympus" })),
  ]),
  "pulsebase.admin.v1.FunctionService/UpdateScheduleTrigger": op([
    // The fixture's own values (it stays disabled), so every answer is the same.
    ok((fx) => ({ triggerId: fx.scheduleTriggerId, cron: "0 4 * * *", timezone: "UTC", missedTicks: "skip" })),
    err("invalid", "invalid_argument", (fx) => ({ triggerId: fx.scheduleTriggerId, cron: "every day", timezone: "Mars/Olympus" })),
    err("not-found", "not_found", () => ({ triggerId: NO_ID, cron: "0 4 * * *" })),
  ]),
  "pulsebase.admin.v1.FunctionService/RotateTriggerSecret": op([ok((_fx, x) => ({ triggerId: x.triggerId!, signingSecret: "whsec_fedcba9876543210" }), freshTrigger), err("not-found", "not_found", () => ({ triggerId: NO_ID }))]),
  "pulsebase.admin.v1.FunctionService/ListScheduleRuns": op([ok((fx) => ({ triggerId: fx.scheduleTriggerId, pageSize: 5 })), err("not-found", undefined, () => ({ triggerId: NO_ID }))]),
  "pulsebase.admin.v1.FunctionService/SetTriggerEnabled": op([ok((_fx, x) => ({ triggerId: x.triggerId!, enabled: false }), freshTrigger), err("not-found", "not_found", () => ({ triggerId: NO_ID, enabled: true }))]),
  "pulsebase.admin.v1.FunctionService/DeleteTrigger": op([ok((_fx, x) => ({ triggerId: x.triggerId! }), freshTrigger), err("not-found", "not_found", () => ({ triggerId: NO_ID }))]),
  "pulsebase.admin.v1.FunctionService/ListTriggers": op([ok((fx) => ({ functionId: fx.echoFnId }))]),
  "pulsebase.admin.v1.FunctionService/RunFunction": op([
    ok((fx) => ({ functionId: fx.scratchFnId, payload: { a: 1, b: [true, null] } })),
    err("not-found", "not_found", () => ({ functionId: NO_ID })),
  ]),
  "pulsebase.admin.v1.FunctionService/ListInvocations": op([ok((fx) => ({ functionId: fx.readerFnId, pageSize: 5 }))]),
  "pulsebase.admin.v1.FunctionService/GetEgressPolicy": op([ok((fx) => ({ appId: fx.appId })), err("not-found", undefined, () => ({ appId: NO_ID }))]),
  "pulsebase.admin.v1.FunctionService/SetEgressPolicy": op([
    ok((fx) => ({ appId: fx.scratchAppId, allowHosts: ["api.example.com", "*.mail.example.com"], allowPrivate: false })),
    err("invalid", "invalid_argument", (fx) => ({ appId: fx.scratchAppId, allowHosts: ["https://bad/host", ""] })),
  ]),
  "pulsebase.admin.v1.FunctionService/ListKvEntries": op([ok((fx) => ({ appId: fx.appId, prefix: "gr" }))]),
  "pulsebase.admin.v1.FunctionService/GetKvEntry": op([ok((fx) => ({ appId: fx.appId, key: "greeting" })), err("not-found", "not_found", (fx) => ({ appId: fx.appId, key: "nope" }))]),
  "pulsebase.admin.v1.FunctionService/DeleteKvEntry": op([
    // The scratch app's kv function stores the key it is given.
    ok((fx, x) => ({ appId: fx.scratchAppId, key: `key-${x.n}` }), async (p) => {
      await p.admin("/pulsebase.admin.v1.FunctionService/RunFunction", { functionId: p.fx.scratchKvFnId, payload: { key: `key-${p.n}` } });
      return {};
    }),
    err("absent", undefined, (fx) => ({ appId: fx.appId, key: "nope" })), err("invalid", undefined, (fx) => ({ appId: fx.appId, key: "" }))]),
  "pulsebase.admin.v1.FunctionService/ListFunctionDeadLetters": op([ok((fx) => ({ appId: fx.appId, pageSize: 5 }))]),
  "pulsebase.admin.v1.FunctionService/ReplayFunctionDeadLetters": op([err("unknown-ids", undefined, (fx) => ({ appId: fx.appId, ids: [NO_ID] }))]),

  "pulsebase.admin.v1.IdentityService/CreateUser": op([
    ok((_fx, x) => ({ name: "Made", email: `made${x.n}@example.org` }), async (p) => ({ n: String(p.n) })),
    err("invalid", "invalid_argument", () => ({ name: "", email: "not-an-email" })),
  ]),
  "pulsebase.admin.v1.IdentityService/CreateTeam": op([ok(() => ({ name: "made team" })), err("invalid", "invalid_argument", () => ({ name: "" }))]),
  "pulsebase.admin.v1.IdentityService/CreateApp": op([ok((fx) => ({ teamId: fx.scratchTeamId, name: "made app" })), err("invalid", undefined, () => ({ teamId: NO_ID, name: "" }))]),
  "pulsebase.admin.v1.IdentityService/GetApp": op([ok((fx) => ({ id: fx.appId })), ok((fx) => ({ appKey: fx.appKey }), undefined, "ok-by-key"), err("not-found", "not_found", () => ({ id: NO_ID }))]),
  "pulsebase.admin.v1.IdentityService/ListApps": op([ok((fx) => ({ teamId: fx.teamId })), err("invalid", undefined, (fx) => ({ teamId: fx.teamId, pageToken: "garbage!" }))]),
  "pulsebase.admin.v1.IdentityService/RotateAppKey": op([ok((_fx, x) => ({ appId: x.appId! }), freshApp), err("not-found", "not_found", () => ({ appId: NO_ID }))]),
  "pulsebase.admin.v1.IdentityService/SetAppPlan": op([
    ok((_fx, x) => ({ appId: x.appId!, plan: { name: "pro", functionsEnabled: true, functionInvocationsPerMinute: 100 } }), freshApp),
    err("not-found", "not_found", () => ({ appId: NO_ID, plan: { name: "pro" } })),
  ]),
  "pulsebase.admin.v1.IdentityService/UpdateAppSettings": op([ok((_fx, x) => ({ appId: x.appId!, strictTokenMode: true, name: "renamed" }), freshApp), err("not-found", "not_found", () => ({ appId: NO_ID, name: "x" }))]),
  "pulsebase.admin.v1.IdentityService/ListConsumers": op([ok((fx) => ({ appId: fx.appId, pageSize: 5 }))]),
  "pulsebase.admin.v1.IdentityService/DeleteConsumer": op([
    ok((_fx, x) => ({ consumerId: x.consumerId! }), async (p) => ({ consumerId: (await p.registerConsumer(p.fx.scratchAppKey, `deleted-${p.n}`)).id })),
    err("not-found", "not_found", () => ({ consumerId: NO_ID })),
  ]),
  "pulsebase.admin.v1.IdentityService/ListSessions": op([ok((fx) => ({ consumerId: fx.listedConsumerId, pageSize: 5 }))]),

  "pulsebase.admin.v1.SqlService/RunSql": op([
    ok((fx) => ({ appId: fx.appId, sql: "SELECT count(*) AS n, max(name) AS last FROM items" })),
    err("sql-error", undefined, (fx) => ({ appId: fx.appId, sql: "SELEC nothing" })),
    err("not-linked", undefined, (fx) => ({ appId: fx.scratchAppId, sql: "SELECT 1" })),
  ]),
  "pulsebase.admin.v1.SqlService/GetSchema": op([ok((fx) => ({ appId: fx.appId }))]),
  "pulsebase.admin.v1.SqlService/BrowseTable": op([ok((fx) => ({ appId: fx.appId, table: "items", pageSize: 10 })), err("not-found", undefined, (fx) => ({ appId: fx.appId, table: "nope" }))]),
  "pulsebase.admin.v1.SqlService/ReadSqlPage": op([
    ok((fx, x) => ({ appId: fx.appId, sql: "SELECT id FROM items ORDER BY id", pageToken: x.token!, pageSize: 2 }), async (p) => ({
      token: String(((await p.admin("/pulsebase.admin.v1.SqlService/RunSql", { appId: p.fx.appId, sql: "SELECT id FROM items ORDER BY id", pageSize: 2 })).results as { nextPageToken: string }[])[0]!.nextPageToken),
    })),
    err("bad-token", "invalid_argument", (fx) => ({ appId: fx.appId, sql: "SELECT 1", pageToken: "garbage!" })),
  ]),
  "pulsebase.admin.v1.SqlService/InsertRow": op([
    heavy(ok((_fx, x) => ({ appId: x.appId!, table: "t", values: { v: "inserted" } }), freshTable)),
    err("no-column", "invalid_argument", (fx) => ({ appId: fx.appId, table: "items", values: { nope: 1 } })),
  ]),
  "pulsebase.admin.v1.SqlService/UpdateRow": op([
    heavy(ok((_fx, x) => ({ appId: x.appId!, table: "t", key: { id: 1 }, values: { v: "changed" } }), freshTable)),
    err("bad-key", "invalid_argument", (fx) => ({ appId: fx.appId, table: "items", key: { name: "x" }, values: { name: "y" } })),
  ]),
  "pulsebase.admin.v1.SqlService/DeleteRow": op([
    heavy(ok((_fx, x) => ({ appId: x.appId!, table: "t", key: { id: 1 } }), freshTable)),
    err("not-found", "not_found", (fx) => ({ appId: fx.appId, table: "nope", key: { id: 1 } })),
  ]),
  // Access rules: reads on the stable app (open mode, never saved); saves on fresh apps (each gets its version 1)
  "pulsebase.admin.v1.AccessRulesService/GetAccessRules": op([ok((fx) => ({ appId: fx.appId })), err("not-found", "not_found", () => ({ appId: NO_ID }))]),
  "pulsebase.admin.v1.AccessRulesService/SetAccessRules": op([
    ok((_fx, x) => ({ appId: x.appId!, mode: "open" }), freshApp),
    err("bad-mode", "invalid_argument", (fx) => ({ appId: fx.appId, mode: "sideways" })),
    err("unknown-value", "invalid_argument", (fx) => ({ appId: fx.appId, mode: "rules", tables: [{ table: "items", select: "owner = :email" }] })),
  ]),
  "pulsebase.admin.v1.AccessRulesService/ListAccessRuleVersions": op([ok((fx) => ({ appId: fx.appId })), err("not-found", "not_found", () => ({ appId: NO_ID })), err("bad-limit", "invalid_argument", (fx) => ({ appId: fx.appId, limit: 1000 }))]),
  "pulsebase.admin.v1.AccessRulesService/TryAsConsumer": op([
    ok((fx) => ({ appId: fx.appId, consumerId: fx.consumerId, sql: "SELECT count(*) AS n FROM items" })),
    err("not-a-consumer", "not_found", (fx) => ({ appId: fx.appId, consumerId: NO_ID, sql: "SELECT 1" })),
  ]),
  // The operator token has no account, so no history or saved queries (console sessions do: test/capabilities/database/sql-editor-data.test.ts).
  "pulsebase.admin.v1.SqlService/ListSqlHistory": op([err("operator-token", "failed_precondition", (fx) => ({ appId: fx.appId }))]),
  "pulsebase.admin.v1.SqlService/ListSavedQueries": op([err("operator-token", "failed_precondition", (fx) => ({ appId: fx.appId }))]),
  "pulsebase.admin.v1.SqlService/SaveQuery": op([err("operator-token", "failed_precondition", (fx) => ({ appId: fx.appId, name: "q", sql: "SELECT 1" }))]),
  "pulsebase.admin.v1.SqlService/DeleteSavedQuery": op([err("operator-token", "failed_precondition", (fx) => ({ appId: fx.appId, id: "1" }))]),
};
