// Set-password links, attacked (issue #28, point 7): a link is checked
// against what its maker may do when it is used, not only when it was made.
// Mallory owns the only team of a password-less account and makes its link;
// before she uses it, the administrator adds the account to another team (or
// makes it an administrator), or Mallory stops being an owner. Using the
// link then must not give her a password for it (and so those teams). Real
// server and PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code } from "@connectrpc/connect";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import type { TestServer } from "../../helpers/server.js";
import { anonymous, codeOf, invite, startWithOwner, type OperatorSession } from "./operator-session.js";

let s: TestServer;
let admin: OperatorSession;
let mallory: OperatorSession;
let malloryTeam: bigint;
let secretTeam: bigint;

beforeAll(async () => {
  ({ s, owner: admin } = await startWithOwner({}, "root@example.com"));
  malloryTeam = (await s.admin.createTeam({ name: "Mallory's" })).id;
  secretTeam = (await s.admin.createTeam({ name: "Secret" })).id;
  mallory = await invite(s, admin, malloryTeam, "mallory@example.com", Role.OWNER);
}, 60_000);
afterAll(() => s.close());

/** A password-less account (as CreateUser makes them) in Mallory's team only, and her link for it. */
async function accountWithLink(email: string): Promise<{ id: bigint; token: string }> {
  const id = (await s.admin.createUser({ name: email, email })).id;
  await s.db.sql.query("INSERT INTO team_members (team_id, user_id, role) VALUES ($1, $2, 'viewer')", [malloryTeam, id]);
  const link = await mallory.client(AccountService).createPasswordLink({ teamId: malloryTeam, userId: id });
  return { id, token: link.token };
}

const hasPassword = async (id: bigint) =>
  (await s.db.sql.query<{ p: boolean }>("SELECT password_hash IS NOT NULL AS p FROM users WHERE id = $1", [id])).rows[0]!.p;

describe("a set-password link is checked again when used", () => {
  it("dies when the account joined a team its maker does not own since", async () => {
    const { id, token } = await accountWithLink("joined@example.com");
    await s.db.sql.query("INSERT INTO team_members (team_id, user_id, role) VALUES ($1, $2, 'owner')", [secretTeam, id]);
    expect(await codeOf(anonymous(s).setPassword({ token, password: "mallory chose this" }))).toBe(Code.NotFound);
    expect(await hasPassword(id)).toBe(false);
  });

  it("dies when the account became an administrator since", async () => {
    const { id, token } = await accountWithLink("promoted@example.com");
    await s.db.sql.query("UPDATE users SET is_admin = true WHERE id = $1", [id]);
    expect(await codeOf(anonymous(s).setPassword({ token, password: "mallory chose this" }))).toBe(Code.NotFound);
    expect(await hasPassword(id)).toBe(false);
  });

  it("dies when its maker is no longer an owner of the account's team", async () => {
    const { id, token } = await accountWithLink("demoted@example.com");
    await s.db.sql.query("UPDATE team_members SET role = 'developer' WHERE team_id = $1 AND user_id = $2", [malloryTeam, mallory.me.userId]);
    try {
      expect(await codeOf(anonymous(s).setPassword({ token, password: "mallory chose this" }))).toBe(Code.NotFound);
      expect(await hasPassword(id)).toBe(false);
    } finally {
      await s.db.sql.query("UPDATE team_members SET role = 'owner' WHERE team_id = $1 AND user_id = $2", [malloryTeam, mallory.me.userId]);
    }
  });

  it("still works when nothing changed, and the administrator's links whatever the teams", async () => {
    const { id, token } = await accountWithLink("fine@example.com");
    expect((await anonymous(s).setPassword({ token, password: "the account's own one" })).teams.map((t) => t.teamName)).toEqual(["Mallory's"]);
    expect(await hasPassword(id)).toBe(true);
    const other = (await s.admin.createUser({ name: "Other", email: "other@example.com" })).id;
    const byAdmin = await admin.client(AccountService).createPasswordLink({ teamId: 0n, userId: other });
    await s.db.sql.query("INSERT INTO team_members (team_id, user_id, role) VALUES ($1, $2, 'viewer')", [secretTeam, other]);
    expect(await codeOf(anonymous(s).setPassword({ token: byAdmin.token, password: "the account's own one" }))).toBe("ok");
  });
});
