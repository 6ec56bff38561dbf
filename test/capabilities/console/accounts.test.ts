// Operator accounts on a real server: first-owner setup by the one-time
// link, sign-in with cookie flags, CSRF, expiry, sign-out everywhere,
// invitations and roles (a viewer cannot deploy), team scoping, sign-in
// rate limits, and the audit log of it all.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { FunctionService } from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { IdentityService } from "../../../gen/pulsebase/admin/v1/identity_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { createModules } from "../../../src/server/modules.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { anonymous, codeOf, invite, login, setupOwner, type OperatorSession } from "./operator-session.js";

let s: TestServer;
let owner: OperatorSession;
let teamId: bigint;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules, env: { PULSEBASE_LOGIN_ATTEMPTS_PER_MINUTE: "40" } });
});
afterAll(() => s.close());

describe("first-owner setup", () => {
  it("takes the one-time token once, makes an admin owner with a first team, and sets a strict session cookie", async () => {
    const anon = anonymous(s);
    expect((await anon.getSetupStatus({})).needsSetup).toBe(true);
    expect(await codeOf(anon.completeSetup({ setupToken: "wrong", name: "X", email: "x@example.com", password: "long enough password" }))).toBe(Code.PermissionDenied);
    owner = await setupOwner(s);
    expect(owner.me.admin).toBe(true);
    expect(owner.me.teams.map((t) => [t.teamName, t.role])).toEqual([["Acme", Role.OWNER]]);
    teamId = owner.me.teams[0]!.teamId;
    expect(owner.setCookie).toMatch(/^__Host-pb_session=[\w-]{40,};/);
    for (const flag of ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"]) expect(owner.setCookie).toContain(flag);
    expect((await anon.getSetupStatus({})).needsSetup).toBe(false);
    // A later setup token cannot make a second owner once one exists? It can be
    // minted only while none exists (server start); a used one is gone.
    expect(await codeOf(anon.completeSetup({ setupToken: "again", name: "Y", email: "y@example.com", password: "long enough password" }))).toBe(Code.PermissionDenied);
  });

  it("refuses weak passwords with field errors", async () => {
    const token = await s.app.console.accounts.newSetupToken();
    const err = await anonymous(s).completeSetup({ setupToken: token, name: "", email: "bad", password: "short" }).catch((e) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect((err as ConnectError).rawMessage).toMatch(/name field is required/);
  });
});

describe("sessions", () => {
  it("needs the CSRF header on every call but GetMe, and no header at all is unauthenticated", async () => {
    expect((await owner.client(AccountService, { csrf: false }).getMe({})).email).toBe("owner@example.com");
    expect(await codeOf(owner.client(IdentityService, { csrf: false }).listApps({ teamId }))).toBe(Code.PermissionDenied);
    expect(await codeOf(owner.client(IdentityService).listApps({ teamId }))).toBe("ok");
    expect(await codeOf(anonymous(s).getMe({}))).toBe(Code.Unauthenticated);
  });

  it("signs in with the password only, ends sessions when they expire and everywhere at once", async () => {
    expect(await codeOf(login(s, "owner@example.com", "wrong password!!"))).toBe(Code.Unauthenticated);
    expect(await codeOf(login(s, "nobody@example.com", "wrong password!!"))).toBe(Code.Unauthenticated);
    const a = await login(s, "OWNER@example.com", "correct horse battery");
    const b = await login(s, "owner@example.com", "correct horse battery");
    expect(await codeOf(a.client(AccountService).getMe({}))).toBe("ok");
    // Expiry is checked by the server, whatever the cookie's Max-Age.
    await s.db.sql.query("UPDATE operator_sessions SET expires_at = now() - interval '1 second' WHERE csrf_token = $1", [a.csrf]);
    expect(await codeOf(a.client(AccountService).getMe({}))).toBe(Code.Unauthenticated);
    const ended = await b.client(AccountService).logoutEverywhere({});
    expect(ended.ended).toBeGreaterThanOrEqual(2);
    expect(await codeOf(b.client(AccountService).getMe({}))).toBe(Code.Unauthenticated);
    expect(await codeOf(owner.client(AccountService).getMe({}))).toBe(Code.Unauthenticated);
    owner = await login(s, "owner@example.com", "correct horse battery");
  });
});

describe("teams, roles and invitations", () => {
  let viewer: OperatorSession;
  let appId: bigint;
  let functionId: bigint;

  beforeAll(async () => {
    const app = await owner.client(IdentityService).createApp({ teamId, name: "shop" });
    appId = app.id;
    functionId = (await owner.client(FunctionService).createFunction({ appId, name: "hello" })).id;
    viewer = await invite(s, owner, teamId, "viewer@example.com", Role.VIEWER);
  });

  it("lets a viewer read but not change anything in its team", async () => {
    expect(viewer.me.teams.map((t) => [t.teamId, t.role])).toEqual([[teamId, Role.VIEWER]]);
    expect((await viewer.client(IdentityService).listApps({ teamId })).apps.map((a) => a.name)).toEqual(["shop"]);
    expect((await viewer.client(FunctionService).listVersions({ functionId })).versions).toEqual([]);
    expect(await codeOf(viewer.client(FunctionService).deployVersion({ functionId, code: "export default () => 1", activate: true }))).toBe(Code.PermissionDenied);
    expect(await codeOf(viewer.client(IdentityService).rotateAppKey({ appId }))).toBe(Code.PermissionDenied);
    expect(await codeOf(viewer.client(AccountService).createInvitation({ teamId, email: "x@example.com", role: Role.OWNER }))).toBe(Code.PermissionDenied);
    // Nothing was deployed behind the refusal.
    expect((await owner.client(FunctionService).listVersions({ functionId })).versions).toEqual([]);
  });

  it("hides other teams' resources (not_found) and refuses listing everything", async () => {
    const other = await s.admin.createTeam({ name: "Other" });
    const foreign = await s.admin.createApp({ teamId: other.id, name: "theirs" });
    expect(await codeOf(viewer.client(IdentityService).getApp({ key: { case: "id", value: foreign.id } }))).toBe(Code.NotFound);
    expect(await codeOf(viewer.client(IdentityService).getApp({ key: { case: "appKey", value: foreign.appKey } }))).toBe(Code.NotFound);
    expect(await codeOf(viewer.client(IdentityService).listApps({ teamId: other.id }))).toBe(Code.NotFound);
    expect(await codeOf(viewer.client(IdentityService).listApps({}))).toBe(Code.PermissionDenied);
    // The instance admin sees every team.
    expect((await owner.client(IdentityService).getApp({ key: { case: "id", value: foreign.id } })).name).toBe("theirs");
  });

  it("promotes, keeps one owner, and a developer deploys", async () => {
    const members = await owner.client(AccountService).listMembers({ teamId });
    const v = members.members.find((m) => m.email === "viewer@example.com")!;
    await owner.client(AccountService).setMemberRole({ teamId, userId: v.userId, role: Role.DEVELOPER });
    // Roles are read per request: the same session can deploy now.
    const ver = await viewer.client(FunctionService).deployVersion({ functionId, code: "export default () => 1", activate: true });
    expect(ver.version).toBe(1);
    const o = members.members.find((m) => m.email === "owner@example.com")!;
    expect(await codeOf(owner.client(AccountService).setMemberRole({ teamId, userId: o.userId, role: Role.VIEWER }))).toBe(Code.FailedPrecondition);
    expect(await codeOf(owner.client(AccountService).setMemberRole({ teamId, userId: v.userId, role: Role.ADMIN }))).toBe(Code.InvalidArgument);
  });

  it("makes invitation links single-use", async () => {
    const inv = await owner.client(AccountService).createInvitation({ teamId, email: "dev2@example.com", role: Role.DEVELOPER });
    expect(inv.token.length).toBeGreaterThan(30);
    const shown = await anonymous(s).getInvitation({ token: inv.token });
    expect([shown.teamName, shown.email, shown.role, shown.accountExists, shown.token]).toEqual(["Acme", "dev2@example.com", Role.DEVELOPER, false, ""]);
    await anonymous(s).acceptInvitation({ token: inv.token, name: "Dev Two", password: "dev two password" });
    expect(await codeOf(anonymous(s).acceptInvitation({ token: inv.token, name: "Dev Two", password: "dev two password" }))).toBe(Code.NotFound);
    const listed = await owner.client(AccountService).listInvitations({ teamId });
    expect(listed.invitations.find((i) => i.email === "dev2@example.com")?.acceptedAt).toBeDefined();
    expect(listed.invitations.every((i) => i.token === "")).toBe(true);
  });

  it("writes every mutation to the audit log: who, what, which resource, the outcome, from where", async () => {
    const log = await owner.client(AccountService).listAuditLog({ teamId });
    const rows = log.entries.map((e) => ({ who: e.actorEmail, what: e.method.split("/")[1], outcome: e.outcome, res: e.resource, address: e.address }));
    expect(rows).toContainEqual(expect.objectContaining({ who: "viewer@example.com", what: "DeployVersion", outcome: "permission_denied", res: expect.objectContaining({ function_id: String(functionId) }) }));
    expect(rows).toContainEqual(expect.objectContaining({ who: "viewer@example.com", what: "DeployVersion", outcome: "ok" }));
    expect(rows).toContainEqual(expect.objectContaining({ who: "owner@example.com", what: "CreateApp", outcome: "ok", res: expect.objectContaining({ id: String(appId), name: "shop" }) }));
    expect(rows).toContainEqual(expect.objectContaining({ who: "owner@example.com", what: "SetMemberRole", outcome: "ok" }));
    expect(rows).toContainEqual(expect.objectContaining({ who: "owner@example.com", what: "CreateInvitation", res: expect.objectContaining({ email: "dev2@example.com" }) }));
    expect(rows.every((r) => r.address === "127.0.0.1")).toBe(true);
    // No secret reaches the log.
    expect(JSON.stringify(log.entries.map((e) => e.resource))).not.toMatch(/password|export default/);
    // The instance-wide log has the sign-ins too (no team).
    const all = await owner.client(AccountService).listAuditLog({});
    expect(all.entries.map((e) => e.method.split("/")[1])).toEqual(expect.arrayContaining(["CompleteSetup", "Login", "LogoutEverywhere"]));
    expect(all.entries.filter((e) => e.method.endsWith("/Login") && e.outcome === "unauthenticated").map((e) => e.resource.email)).toEqual(expect.arrayContaining(["owner@example.com", "nobody@example.com"]));
    // A viewer-level member reads its team's log, not everyone's.
    expect(await codeOf(login(s, "viewer@example.com", "another good password").then((v) => v.client(AccountService).listAuditLog({})))).toBe(Code.PermissionDenied);
  });
});

describe("limits", () => {
  it("keeps at most 20 live sessions per user: a new sign-in ends the oldest", async () => {
    const accounts = s.app.console.accounts;
    const user = (await accounts.userByEmail("owner@example.com"))!;
    const made = [];
    for (let i = 0; i < 21; i++) made.push(await accounts.createSession(Number(user.id), 3600_000, "127.0.0.1", "test"));
    expect(await accounts.session(made[0]!.secret)).toBeUndefined();
    expect(await accounts.session(made[20]!.secret)).toBeDefined();
    const { rows } = await s.db.sql.query<{ n: number }>("SELECT count(*)::int AS n FROM operator_sessions WHERE user_id = $1", [user.id]);
    expect(rows[0]!.n).toBe(20);
  });

  it("refuses a 101st pending invitation of a team", async () => {
    owner = await login(s, "owner@example.com", "correct horse battery"); // the cap above ended the older sessions
    const accounts = s.app.console.accounts;
    const pending = await accounts.pendingInvitations(Number(teamId));
    for (let i = pending; i < 100; i++) await accounts.createInvitation(Number(teamId), `bulk${i}@example.com`, "viewer", null);
    expect(await codeOf(owner.client(AccountService).createInvitation({ teamId, email: "one-more@example.com", role: Role.VIEWER }))).toBe(Code.FailedPrecondition);
  });
});

describe("sign-in rate limits", () => {
  it("locks an account after 10 failed passwords, even for the right one", async () => {
    const results: (Code | "ok")[] = [];
    for (let i = 0; i < 10; i++) results.push(await codeOf(login(s, "dev2@example.com", `wrong-password-${i}`)));
    expect(results.every((c) => c === Code.Unauthenticated)).toBe(true);
    expect(await codeOf(login(s, "dev2@example.com", "dev two password"))).toBe(Code.ResourceExhausted);
    // Another account from the same address is not locked by it.
    expect(await codeOf(login(s, "owner@example.com", "correct horse battery"))).toBe("ok");
  });

  it("limits attempts per address whatever the account (PULSEBASE_LOGIN_ATTEMPTS_PER_MINUTE)", async () => {
    const results: (Code | "ok")[] = [];
    for (let i = 0; i < 45; i++) results.push(await codeOf(login(s, `user${i}@example.com`, "whatever password")));
    expect(results).toContain(Code.ResourceExhausted);
    expect(results.slice(-3)).toEqual([Code.ResourceExhausted, Code.ResourceExhausted, Code.ResourceExhausted]);
  });
});
