// The embedded default (PGlite) runs the same account statements: setup,
// sign-in, the session lookup with its teams, invitations, the audit log.
import { afterAll, beforeAll, expect, it } from "vitest";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { IdentityService } from "../../../gen/pulsebase/admin/v1/identity_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { invite, login, setupOwner } from "./operator-session.js";

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ kind: "pglite" });
});
afterAll(() => s.close());

it("sets up, signs in, invites and audits on PGlite", async () => {
  const owner = await setupOwner(s);
  const teamId = owner.me.teams[0]!.teamId;
  await owner.client(IdentityService).createApp({ teamId, name: "embedded" });
  const viewer = await invite(s, owner, teamId, "v@example.com", Role.VIEWER);
  expect((await viewer.client(AccountService).getMe({})).teams.map((t) => t.role)).toEqual([Role.VIEWER]);
  expect((await login(s, "owner@example.com", "correct horse battery")).me.admin).toBe(true);
  const log = await owner.client(AccountService).listAuditLog({ teamId });
  expect(log.entries.map((e) => e.method.split("/")[1])).toEqual(expect.arrayContaining(["CreateApp", "CreateInvitation"]));
});
