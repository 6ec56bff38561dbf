// Issue #28 (points 7, 9, 10), on a real server and PostgreSQL: an owner
// cannot take over a password-less account by inviting it; such an account
// gets its first password only by a set-password link of an administrator or
// of an owner of its teams; GetInvitation does not tell whether an account
// exists; sign-in refuses huge emails before the audit log sees them and
// every audit field is cut; the setup link expires, closes once an
// administrator exists, never touches an existing account, and wrong tokens
// lock only the address that sent them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AccountService, InvitationSchema } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { anonymous, codeOf, invite, login, sessionFrom, startWithOwner, type OperatorSession } from "./operator-session.js";

/** An anonymous AccountService client whose connections leave from `address` (127.0.0.0/8 all reach the listener). */
function anonymousFrom(s: TestServer, address: string) {
  return createClient(AccountService, createConnectTransport({ baseUrl: s.adminUrl, httpVersion: "1.1", nodeOptions: { localAddress: address } }));
}

describe("invitations and password-less accounts (point 7)", () => {
  let s: TestServer;
  let admin: OperatorSession;
  let attacker: OperatorSession;
  let evilTeam: bigint;
  let secretTeam: bigint;
  let cliUser: bigint;

  beforeAll(async () => {
    ({ s, owner: admin } = await startWithOwner({}, "root@example.com"));
    // An account made as the CLI makes them (no password), in a team of its own.
    cliUser = (await s.admin.createUser({ name: "Cli User", email: "cli@example.com" })).id;
    secretTeam = (await s.admin.createTeam({ name: "Secret", memberUserIds: [cliUser] })).id;
    // The attacker owns another team.
    evilTeam = (await s.admin.createTeam({ name: "Evil" })).id;
    attacker = await invite(s, admin, evilTeam, "attacker@example.com", Role.OWNER);
  }, 60_000);
  afterAll(() => s.close());

  it("GetInvitation answers the same whether the email has an account or not", async () => {
    const forExisting = await attacker.client(AccountService).createInvitation({ teamId: evilTeam, email: "root@example.com", role: Role.VIEWER });
    const forNew = await attacker.client(AccountService).createInvitation({ teamId: evilTeam, email: "newcomer@example.com", role: Role.VIEWER });
    const shape = async (token: string) => {
      const j = toJson(InvitationSchema, await anonymous(s).getInvitation({ token }), { alwaysEmitImplicit: true }) as Record<string, unknown>;
      for (const k of ["id", "email", "createdAt", "expiresAt"]) delete j[k];
      return j;
    };
    expect(await shape(forExisting.token)).toEqual(await shape(forNew.token));
  });

  it("accepting an invitation never sets the password of an existing password-less account nor opens its teams", async () => {
    const inv = await attacker.client(AccountService).createInvitation({ teamId: evilTeam, email: "cli@example.com", role: Role.VIEWER });
    const err = await anonymous(s).acceptInvitation({ token: inv.token, name: "Mallory", password: "mallory's chosen password" }).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unauthenticated);
    const { rows } = await s.db.sql.query<{ password_hash: string | null; name: string }>("SELECT password_hash, name FROM users WHERE id = $1", [cliUser]);
    expect(rows[0]).toEqual({ password_hash: null, name: "Cli User" });
    expect(await codeOf(login(s, "cli@example.com", "mallory's chosen password"))).toBe(Code.Unauthenticated);
    // Nothing joined either: the Evil team has no new member and the invitation is still pending.
    expect((await admin.client(AccountService).listMembers({ teamId: evilTeam })).members.map((m) => m.email)).toEqual(["attacker@example.com"]);
    expect((await anonymous(s).getInvitation({ token: inv.token })).acceptedAt).toBeUndefined();
  });

  it("an existing account with a password still accepts by signing in with it", async () => {
    const inv = await attacker.client(AccountService).createInvitation({ teamId: evilTeam, email: "root@example.com", role: Role.VIEWER });
    expect(await codeOf(anonymous(s).acceptInvitation({ token: inv.token, name: "x", password: "not root's password" }))).toBe(Code.Unauthenticated);
    const me = await anonymous(s).acceptInvitation({ token: inv.token, name: "ignored", password: "correct horse battery" });
    expect(me.email).toBe("root@example.com");
    expect(me.name).toBe("First Owner");
  });

  it("gives a password-less account its first password only through a link its own team's owner or an administrator makes", async () => {
    // The attacker's team is not one of the account's: not_found, as for any account outside it.
    expect(await codeOf(attacker.client(AccountService).createPasswordLink({ teamId: evilTeam, userId: cliUser }))).toBe(Code.NotFound);
    expect(await codeOf(attacker.client(AccountService).createPasswordLink({ teamId: secretTeam, userId: cliUser }))).toBe(Code.NotFound);
    expect(await codeOf(attacker.client(AccountService).createPasswordLink({ userId: cliUser }))).toBe(Code.PermissionDenied);
    // An owner of one of its teams who does not own all of them may not either (it would open the others).
    const shared = (await s.admin.createTeam({ name: "Shared" })).id;
    const sharedOwner = await invite(s, admin, shared, "shared-owner@example.com", Role.OWNER);
    await s.db.sql.query("INSERT INTO team_members (team_id, user_id, role) VALUES ($1, $2, 'viewer')", [shared, cliUser]);
    const refused = await sharedOwner.client(AccountService).createPasswordLink({ teamId: shared, userId: cliUser }).catch((e: unknown) => ConnectError.from(e));
    expect((refused as ConnectError).code).toBe(Code.PermissionDenied);
    expect((refused as ConnectError).rawMessage).toMatch(/administrator/);
    // The administrator may; the link works once and signs in.
    const link = await admin.client(AccountService).createPasswordLink({ teamId: secretTeam, userId: cliUser });
    expect([link.email, link.token.length > 30, link.expiresAt !== undefined]).toEqual(["cli@example.com", true, true]);
    expect(await codeOf(anonymous(s).setPassword({ token: link.token, password: "short" }))).toBe(Code.InvalidArgument);
    let setCookie = "";
    const me = await anonymous(s).setPassword({ token: link.token, password: "cli user's own password" }, { onHeader: (h) => (setCookie = h.get("set-cookie") ?? "") });
    expect(me.email).toBe("cli@example.com");
    expect(me.teams.map((t) => t.teamName).sort()).toEqual(["Secret", "Shared"]);
    expect(await codeOf(sessionFrom(s, setCookie, me).client(AccountService).getMe({}))).toBe("ok");
    expect(await codeOf(anonymous(s).setPassword({ token: link.token, password: "another password again" }))).toBe(Code.NotFound);
    expect((await login(s, "cli@example.com", "cli user's own password")).me.email).toBe("cli@example.com");
    // Now it has a password: no more links, from anyone.
    expect(await codeOf(admin.client(AccountService).createPasswordLink({ teamId: secretTeam, userId: cliUser }))).toBe(Code.FailedPrecondition);
  });

  it("lets an owner of every team of the account make the link", async () => {
    const solo = (await s.admin.createUser({ name: "Solo", email: "solo@example.com" })).id;
    await s.db.sql.query("INSERT INTO team_members (team_id, user_id, role) VALUES ($1, $2, 'developer')", [evilTeam, solo]);
    const link = await attacker.client(AccountService).createPasswordLink({ teamId: evilTeam, userId: solo });
    const me = await anonymous(s).setPassword({ token: link.token, password: "solo's first password" });
    expect(me.teams.map((t) => [t.teamName, t.role])).toEqual([["Evil", Role.DEVELOPER]]);
    // Links expire.
    const later = (await s.admin.createUser({ name: "Later", email: "later@example.com" })).id;
    await s.db.sql.query("INSERT INTO team_members (team_id, user_id, role) VALUES ($1, $2, 'viewer')", [evilTeam, later]);
    const old = await attacker.client(AccountService).createPasswordLink({ teamId: evilTeam, userId: later });
    await s.db.sql.query("UPDATE password_links SET expires_at = now() - interval '1 second'");
    expect(await codeOf(anonymous(s).setPassword({ token: old.token, password: "too late password" }))).toBe(Code.NotFound);
  });
});

describe("sign-in and the audit log (point 9)", () => {
  let s: TestServer;

  beforeAll(async () => {
    ({ s } = await startWithOwner({}, "root@example.com"));
  }, 60_000);
  afterAll(() => s.close());

  const largestAuditRow = async () =>
    (
      await s.db.sql.query<{ n: number }>(
        "SELECT coalesce(max(octet_length(resource::text) + octet_length(actor_email) + octet_length(user_agent) + octet_length(address) + octet_length(method) + octet_length(outcome)), 0)::int AS n FROM audit_log",
      )
    ).rows[0]!.n;

  it("refuses an email over 254 characters (invalid_argument), and a 4 MB one leaves no large audit row", async () => {
    const long = `${"a".repeat(243)}@example.com`; // 255 characters
    expect(long.length).toBe(255);
    expect(await codeOf(anonymous(s).login({ email: long, password: "whatever password" }))).toBe(Code.InvalidArgument);
    const huge = `${"b".repeat(4 * 1024 * 1024)}@example.com`;
    const err = await anonymous(s).login({ email: huge, password: "whatever password" }).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect((err as ConnectError).rawMessage).toMatch(/254/);
    expect(await largestAuditRow()).toBeLessThan(4096);
    // 254 characters is still an address one may sign in with (wrong password here).
    expect(await codeOf(anonymous(s).login({ email: `${"c".repeat(242)}@example.com`, password: "whatever password" }))).toBe(Code.Unauthenticated);
  });

  it("refuses such emails in setup and invitations too", async () => {
    const owner = await login(s, "root@example.com", "correct horse battery");
    const teamId = owner.me.teams[0]!.teamId;
    expect(await codeOf(owner.client(AccountService).createInvitation({ teamId, email: `${"d".repeat(300)}@example.com`, role: Role.VIEWER }))).toBe(Code.InvalidArgument);
  });

  it("cuts every audit field, the user agent and the sign-in's note included", async () => {
    const ua = "U".repeat(10_000); // under Node's 16 KiB header limit
    const client = createClient(AccountService, createConnectTransport({ baseUrl: s.adminUrl, httpVersion: "1.1", interceptors: [(next) => (req) => (req.header.set("user-agent", ua), next(req))] }));
    expect(await codeOf(client.login({ email: `${"e".repeat(240)}@example.com`, password: "p".repeat(100_000) }))).toBe(Code.Unauthenticated);
    const { rows } = await s.db.sql.query<{ user_agent: string; email: string }>("SELECT user_agent, resource->>'email' AS email FROM audit_log ORDER BY id DESC LIMIT 1");
    expect(rows[0]!.user_agent.length).toBeLessThanOrEqual(301);
    expect(rows[0]!.email).toBe(`${"e".repeat(240)}@example.com`);
    expect(await largestAuditRow()).toBeLessThan(4096);
    // The store cuts whatever a caller hands it.
    await s.app.console.audit.append({
      actorKind: "user",
      actorEmail: "x".repeat(10_000),
      method: "m".repeat(10_000),
      resource: Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`k${i}${"y".repeat(1000)}`, "v".repeat(10_000)])),
      outcome: "o".repeat(10_000),
      address: "a".repeat(10_000),
      userAgent: "u".repeat(10_000),
    });
    expect(await largestAuditRow()).toBeLessThan(40_000);
  });
});

describe("the setup link (point 10)", () => {
  let s: TestServer;

  beforeAll(async () => {
    s = await startTestServer();
  }, 60_000);
  afterAll(() => s.close());

  it("never touches an existing account: the same email is refused with a clear error", async () => {
    const existing = (await s.admin.createUser({ name: "Cli User", email: "cli@example.com" })).id;
    const token = await s.app.console.accounts.newSetupToken();
    const err = await anonymous(s)
      .completeSetup({ setupToken: token, name: "Mallory", email: "CLI@example.com", password: "mallory's chosen password", teamName: "T" })
      .catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.AlreadyExists);
    expect((err as ConnectError).rawMessage).toMatch(/already has an account/);
    const { rows } = await s.db.sql.query("SELECT name, password_hash, is_admin FROM users WHERE id = $1", [existing]);
    expect(rows[0]).toEqual({ name: "Cli User", password_hash: null, is_admin: false });
    expect((await anonymous(s).getSetupStatus({})).needsSetup).toBe(true);
  });

  it("expires 24 hours after it was made", async () => {
    const token = await s.app.console.accounts.newSetupToken();
    await s.db.sql.query("UPDATE console_setup SET created_at = now() - interval '24 hours 1 second'");
    const err = await anonymous(s).completeSetup({ setupToken: token, name: "Late", email: "late@example.com", password: "long enough password" }).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.PermissionDenied);
    expect((err as ConnectError).rawMessage).toMatch(/expired/);
  });

  it("limits wrong tokens per address: ten wrong guesses from one do not lock the right token from another", async () => {
    const token = await s.app.console.accounts.newSetupToken();
    const attacker = anonymousFrom(s, "127.0.0.2");
    const guesses: (Code | "ok")[] = [];
    for (let i = 0; i < 10; i++) guesses.push(await codeOf(attacker.completeSetup({ setupToken: `guess-${i}`, name: "M", email: "m@example.com", password: "long enough password" })));
    expect(guesses.every((c) => c === Code.PermissionDenied)).toBe(true);
    // The guessing address is locked, even for the right token...
    expect(await codeOf(attacker.completeSetup({ setupToken: token, name: "M", email: "m@example.com", password: "long enough password" }))).toBe(Code.ResourceExhausted);
    // ...the operator's is not.
    const me = await anonymousFrom(s, "127.0.0.1").completeSetup({ setupToken: token, name: "Root", email: "root@example.com", password: "correct horse battery", teamName: "Acme" });
    expect(me.admin).toBe(true);
    const { rows } = await s.db.sql.query<{ address: string; n: number }>(
      "SELECT address, count(*)::int AS n FROM audit_log WHERE method LIKE '%/CompleteSetup' GROUP BY address ORDER BY address",
    );
    expect(rows.map((r) => r.address)).toEqual(["127.0.0.1", "127.0.0.2"]);
  });

  it("stops working once an instance administrator exists, whatever token", async () => {
    const token = await s.app.console.accounts.newSetupToken();
    const err = await anonymous(s).completeSetup({ setupToken: token, name: "Second", email: "second@example.com", password: "long enough password" }).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.FailedPrecondition);
    const { rows } = await s.db.sql.query<{ n: number }>("SELECT count(*)::int AS n FROM users WHERE is_admin");
    expect(rows[0]!.n).toBe(1);
    expect(await codeOf(login(s, "second@example.com", "long enough password"))).toBe(Code.Unauthenticated);
  });
});
