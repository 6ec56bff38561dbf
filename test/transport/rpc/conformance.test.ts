// Conformance of the unary RPC path: two servers over their own schemas, one
// with the default pipeline and one with PULSEBASE_RPC_PIPELINE=connect-node
// (connect-node's router, the reference), get byte-identical requests for
// every unary method they serve (device services on the public TLS listener,
// admin services on the admin listener) over Connect JSON and binary, gRPC and
// gRPC-Web, HTTP/1.1 and HTTP/2, gzip either way, unknown fields, deadlines,
// no credentials; their answers must agree on status, meaningful headers,
// trailers and decoded bodies (error details included). Cases: cases.ts.
import { fromJson, type DescMessage, type JsonValue } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HealthCheckRequestSchema, HealthCheckResponseSchema } from "../../../gen/health/v1/health_pb.js";
import { createModules } from "../../../src/server/modules.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { until } from "../../helpers/until.js";
import { ADMIN, DEVICE, FN_CODE, type Auth, type Case, type Fx, type Prep } from "./cases.js";
import { build, Endpoint, observe, outcome, type HttpVersion, type Observation, type Protocol, type Variant, type WireRequest } from "./wire.js";

const ENV = {
  // Many sends of one case: no limit of a test-sized deployment may answer some of them.
  PULSEBASE_FUNCTION_PUBLIC_PER_MINUTE: "1000000",
  PULSEBASE_FUNCTION_PUBLIC_PER_ADDRESS_PER_MINUTE: "1000000",
  PULSEBASE_FUNCTION_SCHEDULES_PER_APP: "100000",
  PULSEBASE_LOGIN_ATTEMPTS_PER_MINUTE: "100000",
};

interface Side {
  label: string;
  s: TestServer;
  fx: Fx;
  pub: Endpoint;
  adm: Endpoint;
  /** Fixture values (ids, keys, tokens) by the placeholder they are compared as. */
  names: Map<string, string>;
}

let fast: Side;
let ref: Side;

type Method = { path: string; input: DescMessage; output: DescMessage };

function methodsOf(bindings: { service: { typeName: string; methods: { name: string; methodKind: string; input: DescMessage; output: DescMessage }[] } }[]): Method[] {
  const out: Method[] = [];
  for (const b of bindings) {
    for (const m of b.service.methods) {
      if (m.methodKind === "unary") out.push({ path: `${b.service.typeName}/${m.name}`, input: m.input, output: m.output });
    }
  }
  // grpc.health.v1 Check is served beside the services (grpc-infra.ts) on both listeners.
  out.push({ path: "grpc.health.v1.Health/Check", input: HealthCheckRequestSchema, output: HealthCheckResponseSchema });
  return out;
}

/** A Connect JSON call for the seed and prepares (connect-node's own path is not under test here). */
async function call(origin: string, path: string, body: JsonValue, headers: Record<string, string>, s: TestServer): Promise<Record<string, JsonValue>> {
  const init = { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) };
  const res = origin === s.adminUrl
    ? await fetch(origin + "/" + path.replace(/^\//, ""), init)
    : await s.fetch("/" + path.replace(/^\//, ""), init);
  const json = (await res.json()) as Record<string, JsonValue>;
  if (res.status !== 200) throw new Error(`${path} ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

async function seed(label: string, env: Record<string, string>): Promise<Side> {
  const s = await startTestServer({ modules: createModules, env: { ...ENV, ...env } });
  const admin = (path: string, body: JsonValue) => call(s.adminUrl, path, body, { authorization: `Bearer ${s.operatorToken}` }, s);
  const stable = await s.createApp("stable");
  const consumer = await s.register(stable.appKey, { device_id: "conformance-device" });
  const device = (path: string, body: JsonValue) => call(s.httpsUrl, path, body, { authorization: `Bearer ${consumer.token}` }, s);
  const scratch = await s.createApp("scratch");
  const quiet = await admin("/pulsebase.admin.v1.IdentityService/CreateTeam", { name: "quiet" });

  const db = await admin("/pulsebase.admin.v1.DatabaseService/CreateDatabase", { teamId: String(stable.teamId), name: "main" });
  await admin("/pulsebase.admin.v1.DatabaseService/LinkDatabase", { databaseId: db.id!, appId: String(stable.appId) });
  const rows = Array.from({ length: 60 }, (_, i) => `(${i + 1}, 'item ${String(i + 1).padStart(3, "0")} of the conformance fixture')`).join(", ");
  await admin("/pulsebase.admin.v1.SqlService/RunSql", { appId: String(stable.appId), sql: "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)" });
  await admin("/pulsebase.admin.v1.SqlService/RunSql", { appId: String(stable.appId), sql: `INSERT INTO items (id, name) VALUES ${rows}` });

  const fn = (appId: bigint | string, name: string, code: string) => admin("/pulsebase.admin.v1.FunctionService/CreateFunction", { appId: String(appId), name, code, timeoutMs: 5000 });
  const echo = await fn(stable.appId, "echo", FN_CODE.echo);
  await admin("/pulsebase.admin.v1.FunctionService/CreateHttpTrigger", { functionId: echo.id!, slug: "echo", enabled: true, auth: "consumer" });
  await admin("/pulsebase.admin.v1.FunctionService/CreateHttpTrigger", { functionId: echo.id!, slug: "pub", enabled: true, auth: "public" });
  const slow = await fn(stable.appId, "slow", FN_CODE.slow);
  await admin("/pulsebase.admin.v1.FunctionService/CreateHttpTrigger", { functionId: slow.id!, slug: "slow", enabled: true, auth: "consumer" });
  const reader = await fn(stable.appId, "reader", FN_CODE.kv);
  const schedule = await admin("/pulsebase.admin.v1.FunctionService/CreateScheduleTrigger", { functionId: reader.id!, cron: "0 4 * * *", timezone: "UTC", missedTicks: "skip", enabled: false });
  await admin("/pulsebase.admin.v1.FunctionService/RunFunction", { functionId: reader.id!, payload: { seed: true } });
  const scratchFn = await fn(scratch.appId, "scratch", FN_CODE.echo);
  const scratchKvFn = await fn(scratch.appId, "scratch-kv", FN_CODE.kv);

  const note: JsonValue = { slug: "note", name: "Note", fields: [{ name: "title", type: "text", searchable: true }, { name: "stars", type: "number", searchable: false }], sortableFields: ["stars"], filterableFields: ["stars"] };
  await admin("/pulsebase.admin.v1.CmsService/CreateContentType", { appId: String(stable.appId), contentType: note });
  await admin("/pulsebase.admin.v1.CmsService/CreateContentType", { appId: String(scratch.appId), contentType: note });
  const entry = await admin("/pulsebase.admin.v1.CmsService/CreateEntry", { appId: String(stable.appId), contentType: "note", publish: true, data: { title: "hello world", stars: 3 } });
  const media = await admin("/pulsebase.admin.v1.CmsService/UploadMedia", { appId: String(stable.appId), filename: "seed.txt", contentType: "text/plain", data: Buffer.from("seed").toString("base64") });

  const session = await device("/pulsebase.platform.v1.SessionService/StartSession", {});
  // A consumer whose sessions only the seed makes (the device cases start and end the first one's).
  const listed = await s.register(stable.appKey, { device_id: "listed-device" });
  const listedSession = await call(s.httpsUrl, "/pulsebase.platform.v1.SessionService/StartSession", {}, { authorization: `Bearer ${listed.token}` }, s);
  await call(s.httpsUrl, "/pulsebase.platform.v1.SessionService/EndSession", { sessionId: listedSession.sessionId! }, { authorization: `Bearer ${listed.token}` }, s);
  await call(s.httpsUrl, "/pulsebase.platform.v1.SessionService/StartSession", {}, { authorization: `Bearer ${listed.token}` }, s);
  await device("/pulsebase.platform.v1.AnalyticsService/RecordEvent", { name: "seeded", metadata: { k: "v" } });
  await device("/pulsebase.platform.v1.AnalyticsService/RecordLog", { classFQN: "com.example.Seed", message: "seeded", type: "error", appVersion: "1.0.0" });
  await device("/pulsebase.platform.v1.AnalyticsService/RecordBreadcrumb", { name: "seeded" });
  const filter = { filter: { appId: String(stable.appId) } };
  const first = (key: string) => async (r: Record<string, JsonValue>) => ((r[key] as { id: string }[] | undefined)?.[0]?.id);
  const eventId = await until(async () => first("events")(await admin("/pulsebase.admin.v1.AnalyticsService/ListEvents", filter)), 60_000);
  const logId = await until(async () => first("logs")(await admin("/pulsebase.admin.v1.AnalyticsService/ListLogs", filter)), 60_000);
  const breadcrumbId = await until(async () => first("breadcrumbs")(await admin("/pulsebase.admin.v1.AnalyticsService/ListBreadcrumbs", filter)), 60_000);
  await until(async () => first("invocations")(await admin("/pulsebase.admin.v1.FunctionService/ListInvocations", { functionId: reader.id! })), 60_000);

  const fx: Fx = {
    teamId: String(stable.teamId),
    appId: String(stable.appId),
    appKey: stable.appKey,
    consumerId: String(consumer.id),
    listedConsumerId: String(listed.id),
    deviceId: "conformance-device",
    token: consumer.token,
    sessionId: String(session.sessionId),
    dbId: String(db.id),
    echoFnId: String(echo.id),
    readerFnId: String(reader.id),
    scheduleTriggerId: String(schedule.id),
    entryId: String(entry.id),
    mediaId: String(media.fileId),
    eventId,
    logId,
    breadcrumbId,
    quietTeamId: String(quiet.id),
    scratchTeamId: String(scratch.teamId),
    scratchAppId: String(scratch.appId),
    scratchAppKey: scratch.appKey,
    scratchFnId: String(scratchFn.id),
    scratchKvFnId: String(scratchKvFn.id),
  };
  const names = new Map<string, string>();
  for (const [k, v] of Object.entries(fx)) names.set(v, `<${k}>`);
  names.set(s.operatorToken, "<operator>");
  return { label, s, fx, pub: new Endpoint(s.httpsUrl), adm: new Endpoint(s.adminUrl), names };
}

beforeAll(async () => {
  [fast, ref] = await Promise.all([
    seed("default", {}),
    seed("connect-node", { PULSEBASE_RPC_PIPELINE: "connect-node" }),
  ]);
}, 180_000);
afterAll(async () => {
  for (const side of [fast, ref]) {
    side?.pub.close();
    side?.adm.close();
  }
  await Promise.all([fast?.s.close(), ref?.s.close()]);
});

// ---- normalization: what may differ between two correct servers ----

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
/**
 * Fields whose values are generated (ids, times, keys, tokens, hashes, file
 * names, durations), or counts that depend on how concurrent writes were
 * batched (the analytics coalescer) or on the clock (retry-after).
 */
const DYNAMIC_KEY = /^(id|.*Id|.*Ids|.*At|.*Token|appKey|token|secret|signingSecret|hash|etag|.*Ms|.*Path|url|.*Url|key|uuid|occurrences|uniqueUsers|usersAffected|retryAfterSeconds)$/;

function normalizeString(side: Side, v: string): string {
  if (ISO_TIME.test(v)) return "<time>";
  let out = v;
  // Long generated values inside text (a message naming an app key, a URL with an id).
  for (const [value, name] of side.names) if (value.length >= 8 && out.includes(value)) out = out.replaceAll(value, name);
  return out;
}

/**
 * The seed's teams. An operator's GetMe lists every team, and the teams
 * other cases make meanwhile (fresh teams, CreateTeam) exist on the two
 * servers in whichever order, and at whichever moment, their sends ran
 * (seen: "team 1226" and "team 1227" with their ids swapped): only the
 * seed's are compared.
 */
const SEED_TEAMS = new Set(["stable team", "scratch team", "quiet"]);

function normalize(side: Side, v: unknown, key = ""): unknown {
  if (key === "teams" && Array.isArray(v)) v = v.filter((t: { teamName?: string }) => t?.teamName === undefined || SEED_TEAMS.has(t.teamName));
  if (Array.isArray(v)) return v.map((x) => normalize(side, x, key));
  if (v && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) out[k] = normalize(side, (v as Record<string, unknown>)[k], k);
    return out;
  }
  if ((typeof v === "string" || typeof v === "number") && DYNAMIC_KEY.test(key)) {
    // A fixture's own key or token is named (short numeric ids of two
    // servers can coincide by chance); other generated values only need to be present.
    return (String(v).length >= 8 ? side.names.get(String(v)) : undefined) ?? (v === "" || v === "0" || v === 0 ? v : "<dynamic>");
  }
  return typeof v === "string" ? normalizeString(side, v) : v;
}

function normalizeObservation(side: Side, o: Observation): unknown {
  const headers = { ...o.headers };
  if (headers.etag) headers.etag = "<etag>";
  if (headers["retry-after"]) headers["retry-after"] = "<seconds>";
  // A new session's secret; its attributes are compared.
  if (headers["set-cookie"]) headers["set-cookie"] = headers["set-cookie"].replace(/=[^;,]+/, "=<secret>");
  const trailers = { ...o.trailers };
  for (const h of [headers, trailers]) {
    if (h["grpc-status-details-bin"]) h["grpc-status-details-bin"] = "<decoded in error.details>";
    if (h["grpc-message"]) h["grpc-message"] = normalizeString(side, decodeURIComponent(h["grpc-message"]));
  }
  return normalize(side, { ...o, headers, trailers });
}

/** Paths where two values differ, "a.b[2].c: A ≠ B", for a readable report. */
function diff(a: unknown, b: unknown, at = ""): string[] {
  if (JSON.stringify(a) === JSON.stringify(b)) return [];
  if (a && b && typeof a === "object" && typeof b === "object" && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].flatMap((k) => diff((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], Array.isArray(a) ? `${at}[${k}]` : at ? `${at}.${k}` : k));
  }
  const show = (x: unknown) => (x === undefined ? "(absent)" : JSON.stringify(x).slice(0, 300));
  return [`${at || "(root)"}: ${fast.label}=${show(a)} connect-node=${show(b)}`];
}

// ---- the matrix ----

const TRANSPORTS: [Protocol, HttpVersion][] = [
  ["connect-json", "h1"], ["connect-json", "h2"],
  ["connect-proto", "h1"], ["connect-proto", "h2"],
  ["grpc", "h2"],
  ["grpc-web", "h1"], ["grpc-web", "h2"],
];
/**
 * Besides plain (every case, every transport), a method's first case is sent
 * with these variants, each over one HTTP version per protocol, alternating so
 * that every (protocol, HTTP version) pair gets each kind of variant somewhere.
 */
const h = (cj: HttpVersion, cp: HttpVersion, gw: HttpVersion): [Protocol, HttpVersion][] => [["connect-json", cj], ["connect-proto", cp], ["grpc", "h2"], ["grpc-web", gw]];
const VARIANT_TRANSPORTS: Partial<Record<Variant | "costly", [Protocol, HttpVersion][]>> = {
  "gzip-request": h("h1", "h2", "h1"),
  "gzip-response": h("h2", "h1", "h2"),
  "unknown-field": h("h1", "h2", "h2"),
  "no-auth": h("h2", "h1", "h1"),
  "bad-deadline": h("h1", "h2", "h2"),
  malformed: h("h2", "h1", "h1"),
  // The slow call costs CPU for its whole length.
  deadline: h("h1", "h2", "h1"),
};
VARIANT_TRANSPORTS.costly = h("h2", "h1", "h2");
/** A deadline the slow function (400 ms of work) cannot meet. */
const DEADLINE_MS = 100;

interface Send {
  method: Method;
  listener: "public" | "admin";
  auth: Auth;
  c: Case;
  protocol: Protocol;
  http: HttpVersion;
  variant: Variant;
}

/**
 * The sends of one method. On the admin listener, where every method shares
 * one interceptor and the codecs are the same as on the public one, each
 * variant other than plain goes over one transport per method, rotating with
 * `index` so that the methods together cover every protocol.
 */
function sendsOf(method: Method, listener: "public" | "admin", auth: Auth, cases: Case[], index: number): Send[] {
  const out: Send[] = [];
  // A case that makes a resource per send is costly too.
  const costly = (c: Case) => c.heavy || c.prepare !== undefined;
  const main = Math.max(0, cases.findIndex((c) => !costly(c) && !c.slow));
  cases.forEach((c, i) => {
    const variants: Variant[] = c.slow ? ["deadline"] : i === main && !costly(c) ? ["plain", "gzip-request", "gzip-response", "unknown-field"] : ["plain"];
    if (i === main && auth !== "none") variants.push("no-auth");
    // A malformed deadline header, on the main case of a few methods.
    if (i === main && /StartSession|IdentityService\/GetApp$/.test(method.path)) variants.push("bad-deadline");
    // A body that does not parse: every device method (the listener open to anyone), a few admin ones.
    if (i === main && (listener === "public" || /IdentityService\/(GetApp|CreateApp)$/.test(method.path))) variants.push("malformed");
    for (const variant of variants) {
      let transports = variant !== "plain" ? VARIANT_TRANSPORTS[variant]! : costly(c) ? VARIANT_TRANSPORTS.costly! : TRANSPORTS;
      if (listener === "admin" && variant !== "plain") transports = [transports[index % transports.length]!];
      for (const [protocol, http] of transports) out.push({ method, listener, auth, c, protocol, http, variant });
    }
  });
  return out;
}

function authHeaders(auth: Auth, side: Side): Record<string, string> {
  if (auth === "consumer") return { authorization: `Bearer ${side.fx.token}` };
  if (auth === "app-key") return { "x-app-key": side.fx.appKey };
  if (auth === "operator") return { authorization: `Bearer ${side.s.operatorToken}` };
  return {};
}

interface Result {
  key: string;
  mismatch: string[];
  expectation?: string;
  fastOutcome: string;
  refOutcome: string;
  compressed: boolean;
  note?: string;
}

let seq = 0;

async function runSend(x: Send): Promise<Result> {
  const n = ++seq;
  const one = async (side: Side) => {
    const prep: Prep = {
      fx: side.fx,
      n,
      admin: (path, body) => call(side.s.adminUrl, path, body, { authorization: `Bearer ${side.s.operatorToken}` }, side.s),
      registerConsumer: async (appKey, deviceId) => {
        const r = await side.s.register(appKey, { device_id: deviceId });
        return { id: String(r.id), token: r.token };
      },
      device: (path, body) => call(side.s.httpsUrl, path, body, { authorization: `Bearer ${side.fx.token}` }, side.s),
    };
    // (A request without credentials is refused before it could use the resource.)
    const made = x.c.prepare && x.variant !== "no-auth" ? await x.c.prepare(prep) : undefined;
    // Without the prepared resource, any well-formed id does.
    const extra = new Proxy<Record<string, string>>({ n: String(n), ...made }, { get: (t, k: string) => t[k] ?? "1" }) as Record<string, string>;
    return { side, extra };
  };
  const [pf, pr] = await Promise.all([one(fast), one(ref)]);
  const request = (side: Side, extra: Record<string, string>): WireRequest => ({
    path: `/${x.method.path}`,
    protocol: x.protocol,
    http: x.http,
    variant: x.variant,
    json: x.c.req(side.fx, extra),
    input: x.method.input,
    output: x.method.output,
    headers: authHeaders(x.auth, side),
    timeoutMs: DEADLINE_MS,
  });
  const rf = request(fast, pf.extra);
  const rr = request(ref, pr.extra);
  // Valid for the schema (a typo in a case fails here, not as a server difference).
  fromJson(x.method.input, rr.json);
  const [of, or] = await Promise.all([
    (x.listener === "public" ? fast.pub : fast.adm).send(x.http, rf.path, build(rf)),
    (x.listener === "public" ? ref.pub : ref.adm).send(x.http, rr.path, build(rr)),
  ]);
  const obsF = observe(rf, of);
  const obsR = observe(rr, or);
  const key = `${x.method.path} [${x.protocol} ${x.http}] ${x.c.name}/${x.variant}`;
  const result: Result = {
    key,
    mismatch: diff(normalizeObservation(fast, obsF), normalizeObservation(ref, obsR)),
    fastOutcome: outcome(obsF),
    refOutcome: outcome(obsR),
    compressed: obsR.headers["content-encoding"] === "gzip" || (obsR.frames ?? []).some((f) => f.includes("gzip")),
  };
  // connect-node leaves deadlines to the handler (its ctx.signal), and no
  // unary handler here watches it: it answers the slow call late and ok.
  // A pipeline that enforces the deadline itself may answer
  // deadline_exceeded instead, written as the protocol says.
  if (x.variant === "deadline" && result.fastOutcome === "deadline_exceeded" && result.refOutcome !== "deadline_exceeded") {
    const grpcStatus = obsF.trailers["grpc-status"] ?? obsF.headers["grpc-status"];
    const wellFormed = x.protocol.startsWith("connect") ? obsF.status === 504 : obsF.status === 200 && grpcStatus === "4";
    result.mismatch = wellFormed ? [] : [`deadline_exceeded not written as ${x.protocol} says: ${JSON.stringify(obsF)}`];
    result.note = `${key}: deadline_exceeded (connect-node: ${result.refOutcome})`;
  }
  // connect-es maps a protobuf body that does not parse to internal (its
  // binary serialization throws Code.Internal: Connect HTTP 500, grpc-status
  // 13); a pipeline that answers invalid_argument there instead (Connect 400,
  // grpc-status 3) is a client mistake reported as one.
  if (x.variant === "malformed" && result.refOutcome === "internal" && result.fastOutcome === "invalid_argument") {
    const grpcStatus = obsF.trailers["grpc-status"] ?? obsF.headers["grpc-status"];
    const wellFormed = x.protocol.startsWith("connect") ? obsF.status === 400 : obsF.status === 200 && grpcStatus === "3";
    result.mismatch = wellFormed ? [] : [`invalid_argument not written as ${x.protocol} says: ${JSON.stringify(obsF)}`];
    result.note = `${key}: invalid_argument (connect-node: internal)`;
  }
  const wanted = x.variant === "no-auth" ? (x.auth === "app-key" ? "invalid_argument" : "unauthenticated")
    : x.variant === "unknown-field" && x.protocol === "connect-json" ? undefined
    : x.variant === "bad-deadline" ? undefined
    : x.variant === "malformed" ? undefined
    : x.c.expect;
  if (wanted !== undefined && result.refOutcome !== wanted) {
    result.expectation = `${key}: connect-node answered ${result.refOutcome} (${JSON.stringify(obsR.error?.message ?? obsR.problem ?? "")}), the case expects ${wanted}`;
  }
  return result;
}

/** Runs each method's sends in order (both servers in lockstep), up to `width` methods at once. */
async function runAll(groups: Send[][], width: number): Promise<Result[]> {
  const results: Result[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < groups.length) {
      const g = groups[next++]!;
      for (const x of g) results.push(await runSend(x));
    }
  }));
  return results;
}

function plan(listener: "public" | "admin", methods: Method[], table: Record<string, { auth: Auth; cases: Case[] }>) {
  const missing = methods.filter((m) => !table[m.path]).map((m) => m.path);
  const stale = Object.keys(table).filter((p) => !methods.some((m) => m.path === p));
  // The costly methods first, so that they do not make the tail.
  const cost = (m: Method) => table[m.path]!.cases.filter((c) => c.heavy || c.prepare || c.slow).length;
  const groups = methods.filter((m) => table[m.path]).sort((a, b) => cost(b) - cost(a)).map((m, i) => sendsOf(m, listener, table[m.path]!.auth, table[m.path]!.cases, i));
  return { missing, stale, groups };
}

/** connect-node's outcomes by variant and protocol, e.g. "unknown-field connect-json: invalid_argument×22". */
function summary(results: Result[]): string {
  const by = new Map<string, Map<string, number>>();
  for (const r of results) {
    const [, transport, variant] = /\[(\S+) \S+\] \S+\/(\S+)$/.exec(r.key)!;
    const k = `${variant} ${transport}`;
    const m = by.get(k) ?? new Map<string, number>();
    m.set(r.refOutcome, (m.get(r.refOutcome) ?? 0) + 1);
    by.set(k, m);
  }
  const lines = [...by].sort().map(([k, m]) => `${k}: ${[...m].map(([o, n]) => `${o}×${n}`).join(" ")}`);
  const notes = results.flatMap((r) => (r.note ? [r.note] : []));
  if (notes.length) lines.push(`accepted divergences (${notes.length}):`, ...notes.slice(0, 20));
  return lines.join("\n");
}

function report(results: Result[]): { mismatches: string[]; expectations: string[] } {
  const mismatches = results.filter((r) => r.mismatch.length > 0).map((r) => `${r.key} (${fast.label}: ${r.fastOutcome}, connect-node: ${r.refOutcome})\n    ${r.mismatch.join("\n    ")}`);
  const expectations = results.flatMap((r) => (r.expectation ? [r.expectation] : []));
  return { mismatches, expectations };
}

/**
 * Every served method of a listener has cases and every case a method;
 * each send gets the same answer from both servers, and connect-node meets
 * each case's premise. Returns the sends' results.
 */
async function agree(listener: "public" | "admin", methods: Method[], table: Record<string, { auth: Auth; cases: Case[] }>): Promise<Result[]> {
  const { missing, stale, groups } = plan(listener, methods, table);
  expect(missing, "unary methods without a conformance case (cases.ts)").toEqual([]);
  expect(stale, "cases of methods no longer served").toEqual([]);
  const results = await runAll(groups, 8);
  const { mismatches, expectations } = report(results);
  expect(expectations, "cases whose premise connect-node does not meet").toEqual([]);
  expect(mismatches, `${mismatches.length} of ${results.length} sends differ`).toEqual([]);
  return results;
}

describe("unary RPC conformance against connect-node", () => {
  it("the reference server runs connect-node's router", () => {
    const pipeline = (side: Side) => (side.s.config as unknown as Record<string, unknown>).rpcPipeline;
    // A build without the setting runs connect-node on both (which must agree all the more).
    if (pipeline(fast) === undefined) expect(pipeline(ref)).toBeUndefined();
    else expect([pipeline(fast), pipeline(ref)]).toEqual(["fast", "connect-node"]);
  });

  it("device services on the public listener agree, method by method", async () => {
    const methods = methodsOf(fast.s.app.modules.flatMap((m) => m.device ?? []));
    // Both servers serve the same methods.
    expect(methodsOf(ref.s.app.modules.flatMap((m) => m.device ?? [])).map((m) => m.path)).toEqual(methods.map((m) => m.path));
    const results = await agree("public", methods, DEVICE);
    // The compression cases did compress (a response over connect-node's threshold exists).
    for (const p of ["connect", "grpc"]) expect(results.some((r) => r.compressed && r.key.includes(`[${p}`)), `a compressed ${p} response`).toBe(true);
    console.info(`device conformance: ${methods.length} methods, ${results.length} sends per server\n${summary(results)}`);
  }, 300_000);

  it("admin services on the admin listener agree, method by method", async () => {
    // Analytics written by the device cases are applied before the operator reads them.
    for (const side of [fast, ref]) {
      await until(async () => {
        const r = await call(side.s.adminUrl, "/pulsebase.admin.v1.AnalyticsService/GetQueueStats", {}, { authorization: `Bearer ${side.s.operatorToken}` }, side.s);
        return Number(r.lag ?? 0) === 0 && Number(r.inFlight ?? 0) === 0 ? true : undefined;
      }, 60_000);
    }
    const bindings = [...fast.s.app.modules, fast.s.app.console].flatMap((m) => m.admin ?? []);
    const methods = methodsOf(bindings);
    const results = await agree("admin", methods, ADMIN);
    console.info(`admin conformance: ${methods.length} methods, ${results.length} sends per server\n${summary(results)}`);
  }, 300_000);
});
