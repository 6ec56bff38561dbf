// Every admin method against every role, from the descriptors: a viewer, a
// developer and an owner of the team (and a member of another team) call
// each method of every admin service with a request naming the team's own
// resources. Allowed when the method's `role` option is at most the
// caller's role (the answer is then anything but permission_denied /
// unauthenticated), else permission_denied; other teams' resources are
// not_found. The role is checked on the server whatever the client sends.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, getOption, type DescMessage, type DescMethod, type DescService, type Message } from "@bufbuild/protobuf";
import { reflect, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { DatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { FunctionService } from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { Role, role as roleOption, Scope, scope as scopeOption } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { createModules } from "../../../src/server/modules.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { invite, login, setupOwner, type OperatorSession } from "./operator-session.js";

const PASSWORD = "another good password";

let s: TestServer;
let admin: OperatorSession;
let teamId: bigint;
const sessions: Partial<Record<"viewer" | "developer" | "owner" | "stranger", OperatorSession>> = {};

type Ids = Partial<Record<Scope, bigint>>;

/** A fresh set of resources in a team: an app, a function with a trigger, a linked database, a consumer, analytics rows. */
async function fixture(team: bigint): Promise<Ids> {
  const app = await s.admin.createApp({ teamId: team, name: "fixture" });
  const fns = s.adminClient(FunctionService);
  const fn = await fns.createFunction({ appId: app.id, name: `f${Date.now()}` });
  const trig = await fns.createHttpTrigger({ functionId: fn.id, slug: `s${Math.random().toString(36).slice(2, 10)}` });
  const dbs = s.adminClient(DatabaseService);
  const db = await dbs.createDatabase({ teamId: team, name: `d${Date.now()}` });
  await dbs.linkDatabase({ databaseId: db.id, appId: app.id });
  const consumer = await s.register(app.appKey);
  const q = async (sql: string, p: unknown[]) => BigInt((await s.db.sql.query<{ id: string }>(sql, p)).rows[0]!.id);
  const event = await q("INSERT INTO analytics_events (app_id, name, created_at, updated_at) VALUES ($1, 'e', now(), now()) RETURNING id", [app.id]);
  const log = await q(
    `INSERT INTO analytics_logs (app_id, hash, app_versions, class_fqn, type, message, stack_trace, created_at, last_seen_at)
     VALUES ($1, md5(random()::text), '1.0', 'E', 'crash', 'm', 's', now(), now()) RETURNING id`, [app.id]);
  const occ = await q(
    `INSERT INTO analytics_log_occurrences (log_id, consumer_id, user_id, app_version, created_at)
     VALUES ($1, $2, 'u', '1.0', now()) RETURNING id`, [log, consumer.id]);
  const crumb = await q("INSERT INTO analytics_breadcrumbs (app_id, name, created_at, last_seen_at) VALUES ($1, 'b', now(), now()) RETURNING id", [app.id]);
  return {
    [Scope.TEAM]: team,
    [Scope.APP]: app.id,
    [Scope.FUNCTION]: fn.id,
    [Scope.DATABASE]: BigInt(db.id),
    [Scope.CONSUMER]: BigInt(consumer.id),
    [Scope.EVENT]: event,
    [Scope.LOG]: log,
    [Scope.LOG_OCCURRENCE]: occ,
    [Scope.BREADCRUMB]: crumb,
    [Scope.TRIGGER]: trig.id,
  };
}

/** A request naming the fixture's resources in every scoped field (nested ones too). */
function requestFor(desc: DescMessage, ids: Ids): Message {
  const msg = create(desc);
  const fill = (r: ReflectMessage, depth: number) => {
    for (const f of r.fields) {
      const kind = getOption(f, scopeOption);
      if (kind !== Scope.UNSPECIFIED && f.fieldKind === "scalar") {
        if (f.oneof && f.scalar !== 9 /* STRING */ && r.oneofCase(f.oneof) !== undefined) continue;
        if (f.scalar === 9) continue; // app_key: the id alternative is used
        const v = ids[kind];
        if (v) r.set(f, typeof r.get(f) === "number" ? Number(v) : v);
      } else if (f.fieldKind === "message" && depth < 2 && !f.message.typeName.startsWith("google.")) {
        const sub = reflect(f.message);
        fill(sub, depth + 1);
        r.set(f, sub);
      }
    }
  };
  fill(reflect(desc, msg), 0);
  return msg;
}

const LAST = new Set(["Logout", "LogoutEverywhere"]);

function adminMethods(): DescMethod[] {
  const services: DescService[] = [...s.app.modules.flatMap((m) => m.admin ?? []).map((b) => b.service), AccountService];
  const methods = services.flatMap((svc) => svc.methods);
  // Deletions late (the rest still find their resources), sign-outs last.
  const rank = (m: DescMethod) => (LAST.has(m.name) ? 2 : /^(Delete|Remove|Revoke|Suspend|Unlink)/.test(m.name) ? 1 : 0);
  return [...methods].sort((a, b) => rank(a) - rank(b));
}

async function call(session: OperatorSession, m: DescMethod, req: Message): Promise<Code | "ok"> {
  const transport = createConnectTransport({
    baseUrl: s.adminUrl,
    httpVersion: "1.1",
    interceptors: [(next) => (r) => {
      r.header.set("cookie", session.cookie);
      r.header.set("x-csrf-token", session.csrf);
      return next(r);
    }],
  });
  const client = createClient(m.parent, transport) as unknown as Record<string, (r: Message, o?: unknown) => Promise<unknown>>;
  return outcome(m, (o) => client[m.localName]!(req, o));
}

/**
 * "ok" or the error code of a call. A server stream (FollowInvocations) that
 * was let through runs until cancelled: its first answer or error decides,
 * and one that is still open after a second was admitted.
 */
async function outcome(m: DescMethod, start: (o: { timeoutMs?: number; signal?: AbortSignal }) => unknown): Promise<Code | "ok"> {
  if (m.methodKind !== "server_streaming") {
    try {
      await start({ timeoutMs: 20_000 });
      return "ok";
    } catch (e) {
      return ConnectError.from(e).code;
    }
  }
  const abort = new AbortController();
  const it = (start({ signal: abort.signal }) as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  try {
    return await Promise.race([it.next().then(() => "ok" as const), new Promise<"ok">((r) => setTimeout(() => r("ok"), 1000))]);
  } catch (e) {
    return ConnectError.from(e).code;
  } finally {
    abort.abort();
    await it.return?.().catch(() => {});
  }
}

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  admin = await setupOwner(s, "root@example.com");
  teamId = (await s.admin.createTeam({ name: "Product" })).id;
  // The admin invites an owner, who invites the rest.
  sessions.owner = await invite(s, admin, teamId, "owner@example.com", Role.OWNER);
  sessions.developer = await invite(s, sessions.owner, teamId, "dev@example.com", Role.DEVELOPER);
  sessions.viewer = await invite(s, sessions.owner, teamId, "viewer@example.com", Role.VIEWER);
  const elsewhere = (await s.admin.createTeam({ name: "Elsewhere" })).id;
  sessions.stranger = await invite(s, admin, elsewhere, "stranger@example.com", Role.OWNER);
}, 120_000);
afterAll(() => s.close());

describe("every admin method declares a role", () => {
  it("has the role option on each method of each admin service (unannotated ones would be refused)", () => {
    const missing = adminMethods().filter((m) => getOption(m, roleOption) === Role.UNSPECIFIED).map((m) => `${m.parent.name}.${m.name}`);
    expect(missing).toEqual([]);
    expect(adminMethods().length).toBeGreaterThan(80);
  });
});

describe.each([
  ["viewer", Role.VIEWER],
  ["developer", Role.DEVELOPER],
  ["owner", Role.OWNER],
] as const)("a team %s", (name, role) => {
  it("is allowed exactly the methods at or below its role, and refused the rest with permission_denied", { timeout: 300_000 }, async () => {
    const ids = await fixture(teamId);
    const rows: string[] = [];
    const wrong: string[] = [];
    for (const m of adminMethods()) {
      const need = getOption(m, roleOption);
      if (need === Role.ANONYMOUS) continue;
      // Sign-outs end the session they are called with: each gets a fresh one.
      const session = LAST.has(m.name) ? await login(s, sessions[name]!.me.email, PASSWORD) : sessions[name]!;
      const got = await call(session, m, requestFor(m.input, ids));
      const allowed = need <= role;
      const ok = allowed ? got !== Code.PermissionDenied && got !== Code.Unauthenticated : got === Code.PermissionDenied;
      const label = `${m.parent.name}.${m.name} needs ${Role[need]}: ${got === "ok" ? "ok" : Code[got]}`;
      rows.push(label);
      if (!ok) wrong.push(label);
    }
    expect(wrong, rows.join("\n")).toEqual([]);
    expect(rows.length).toBeGreaterThan(75);
  });
});

describe("a member of another team", () => {
  it("finds nothing of this team (not_found) through any method that names a resource", { timeout: 300_000 }, async () => {
    const ids = await fixture(teamId);
    const wrong: string[] = [];
    for (const m of adminMethods()) {
      const need = getOption(m, roleOption);
      if (need === Role.ANONYMOUS || need === Role.ADMIN) continue;
      const req = requestFor(m.input, ids);
      const named = JSON.stringify(req, (_k, v) => (typeof v === "bigint" ? String(v) : v));
      if (!/"[1-9]/.test(named)) continue; // names nothing: GetMe, GetQueueStats, Logout
      const got = await call(sessions.stranger!, m, req);
      if (got !== Code.NotFound) wrong.push(`${m.parent.name}.${m.name}: ${got === "ok" ? "ok" : Code[got]}`);
    }
    expect(wrong).toEqual([]);
  });
});

describe("the operator token", () => {
  it("is the instance administrator: every method is allowed", { timeout: 300_000 }, async () => {
    const ids = await fixture(teamId);
    const wrong: string[] = [];
    for (const m of adminMethods()) {
      if (LAST.has(m.name) || getOption(m, roleOption) === Role.ANONYMOUS) continue;
      const client = s.adminClient(m.parent) as unknown as Record<string, (r: Message, o?: unknown) => Promise<unknown>>;
      const req = requestFor(m.input, ids);
      const got = await outcome(m, (o) => client[m.localName]!(req, o));
      if (got === Code.PermissionDenied || got === Code.Unauthenticated) wrong.push(`${m.parent.name}.${m.name}`);
    }
    expect(wrong).toEqual([]);
  });
});
