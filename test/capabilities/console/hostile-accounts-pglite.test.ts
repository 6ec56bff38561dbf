// The embedded default (PGlite) runs the statements of issue #28's account
// fixes too: setup refusing an existing account, set-password links, the
// audit retention sweep.
import { afterAll, beforeAll, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { anonymous, login, setupOwner } from "./operator-session.js";

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ kind: "pglite" });
});
afterAll(() => s.close());

it("refuses setup for an existing account, gives a CLI-made account its password by link, and sweeps old audit rows on PGlite", async () => {
  const cli = await s.admin.createUser({ name: "Cli", email: "cli@example.com" });
  const token = await s.app.console.accounts.newSetupToken();
  const err = await anonymous(s).completeSetup({ setupToken: token, name: "M", email: "cli@example.com", password: "long enough password" }).catch((e: unknown) => ConnectError.from(e));
  expect((err as ConnectError).code).toBe(Code.AlreadyExists);
  const owner = await setupOwner(s);
  const link = await owner.client(AccountService).createPasswordLink({ userId: cli.id });
  await anonymous(s).setPassword({ token: link.token, password: "cli's first password" });
  expect((await login(s, "cli@example.com", "cli's first password")).me.email).toBe("cli@example.com");
  await s.db.sql.query("UPDATE audit_log SET at = now() - interval '400 days' WHERE method LIKE '%/CompleteSetup'");
  expect(await s.app.console.audit.sweep(365)).toBe(2);
  const { rows } = await s.db.sql.query<{ method: string }>("SELECT method FROM audit_log");
  expect(rows.some((r) => r.method.endsWith("/CompleteSetup"))).toBe(false);
  expect(rows.some((r) => r.method.endsWith("/SetPassword"))).toBe(true);
});
