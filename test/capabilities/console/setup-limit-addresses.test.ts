// The setup link's wrong-token limit, attacked (issue #28, point 10): a
// guesser behind a trusted proxy picks a new IPv6 address of its /64 for
// every guess (one site gets a whole /64), or, with no trusted proxy, sends
// an X-Forwarded-For of its choosing. Neither escapes the limit: addresses
// are limited by /64, and X-Forwarded-For counts only from a trusted proxy.
// Real servers and sockets.
import { afterEach, describe, expect, it } from "vitest";
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { codeOf } from "./operator-session.js";

/** An anonymous client leaving from `localAddress`, claiming `forwardedFor` in X-Forwarded-For. */
function client(s: TestServer, localAddress: string, forwardedFor: string) {
  return createClient(
    AccountService,
    createConnectTransport({
      baseUrl: s.adminUrl,
      httpVersion: "1.1",
      nodeOptions: { localAddress },
      interceptors: [(next) => (req) => (req.header.set("x-forwarded-for", forwardedFor), next(req))],
    }),
  );
}

const setup = (c: ReturnType<typeof client>, token: string) =>
  codeOf(c.completeSetup({ setupToken: token, name: "M", email: "m@example.com", password: "long enough password" }));

let s: TestServer | undefined;
afterEach(async () => {
  await s?.close();
  s = undefined;
});

describe("wrong setup tokens are limited per client, whatever address it picks", () => {
  it("behind a trusted proxy, new addresses of one IPv6 /64 count as one", async () => {
    s = await startTestServer({ env: { PULSEBASE_TRUSTED_PROXIES: "127.0.0.1" } });
    const token = await s.app.console.accounts.newSetupToken();
    for (let i = 1; i <= 10; i++) expect(await setup(client(s, "127.0.0.1", `2001:db8:1:2::${i.toString(16)}`), `guess-${i}`)).toBe(Code.PermissionDenied);
    // Another address of the same /64 (and its long form) is locked, even with the right token.
    expect(await setup(client(s, "127.0.0.1", "2001:db8:1:2:ffff:ffff:ffff:fffe"), token)).toBe(Code.ResourceExhausted);
    expect(await setup(client(s, "127.0.0.1", "2001:0db8:0001:0002:0000:0000:0000:0099"), token)).toBe(Code.ResourceExhausted);
    // Another site's /64 is not.
    expect(await setup(client(s, "127.0.0.1", "2001:db8:1:3::1"), token)).toBe("ok");
  });

  it("an IPv4 client is the same client in its IPv4-mapped IPv6 form", async () => {
    s = await startTestServer({ env: { PULSEBASE_TRUSTED_PROXIES: "127.0.0.1" } });
    const token = await s.app.console.accounts.newSetupToken();
    for (let i = 1; i <= 10; i++) expect(await setup(client(s, "127.0.0.1", "203.0.113.7"), `guess-${i}`)).toBe(Code.PermissionDenied);
    expect(await setup(client(s, "127.0.0.1", "::ffff:203.0.113.7"), token)).toBe(Code.ResourceExhausted);
    expect(await setup(client(s, "127.0.0.1", "203.0.113.8"), token)).toBe("ok");
  });

  it("without a trusted proxy, X-Forwarded-For is ignored: a changing one does not help", async () => {
    s = await startTestServer();
    const token = await s.app.console.accounts.newSetupToken();
    for (let i = 1; i <= 10; i++) expect(await setup(client(s, "127.0.0.3", `198.51.100.${i}`), `guess-${i}`)).toBe(Code.PermissionDenied);
    expect(await setup(client(s, "127.0.0.3", "198.51.100.99"), token)).toBe(Code.ResourceExhausted);
    expect(await setup(client(s, "127.0.0.1", "198.51.100.99"), token)).toBe("ok");
  });
});
