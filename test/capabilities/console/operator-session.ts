// Console sign-in for tests: the cookie and CSRF token of a real session on
// the admin listener, and Connect clients that send them as the browser does.
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AccountService, type Me } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";

export interface OperatorSession {
  me: Me;
  cookie: string;
  setCookie: string;
  csrf: string;
  client<S extends DescService>(service: S, opts?: { csrf?: boolean }): Client<S>;
}

/** "ok", or the Connect code the call failed with. */
export async function codeOf(p: Promise<unknown>): Promise<Code | "ok"> {
  try {
    await p;
    return "ok";
  } catch (e) {
    return ConnectError.from(e).code;
  }
}

export function anonymous(server: TestServer): Client<typeof AccountService> {
  return createClient(AccountService, createConnectTransport({ baseUrl: server.adminUrl, httpVersion: "1.1" }));
}

export function sessionFrom(server: TestServer, setCookie: string, me: Me): OperatorSession {
  const cookie = setCookie.split(";")[0]!;
  const client = <S extends DescService>(service: S, opts: { csrf?: boolean } = {}) =>
    createClient(
      service,
      createConnectTransport({
        baseUrl: server.adminUrl,
        httpVersion: "1.1",
        interceptors: [
          (next) => (req) => {
            req.header.set("cookie", cookie);
            if (opts.csrf !== false) req.header.set("x-csrf-token", me.csrfToken);
            return next(req);
          },
        ],
      }),
    );
  return { me, cookie, setCookie, csrf: me.csrfToken, client };
}

async function withCookie(call: (onHeader: (h: Headers) => void) => Promise<Me>): Promise<{ me: Me; setCookie: string }> {
  let setCookie = "";
  const me = await call((h) => {
    setCookie = h.get("set-cookie") ?? "";
  });
  return { me, setCookie };
}

/** The first owner, through the one-time setup token. */
export async function setupOwner(server: TestServer, email = "owner@example.com", password = "correct horse battery"): Promise<OperatorSession> {
  const token = await server.app.console.accounts.newSetupToken();
  const { me, setCookie } = await withCookie((onHeader) =>
    anonymous(server).completeSetup({ setupToken: token, name: "First Owner", email, password, teamName: "Acme" }, { onHeader }),
  );
  return sessionFrom(server, setCookie, me);
}

/** A server (started with `opts`) and its first owner, an administrator, signed in as `email`. */
export async function startWithOwner(opts: Parameters<typeof startTestServer>[0] = {}, email?: string): Promise<{ s: TestServer; owner: OperatorSession }> {
  const s = await startTestServer(opts);
  try {
    return { s, owner: await setupOwner(s, email) };
  } catch (e) {
    await s.close();
    throw e;
  }
}

export async function login(server: TestServer, email: string, password: string): Promise<OperatorSession> {
  const { me, setCookie } = await withCookie((onHeader) => anonymous(server).login({ email, password }, { onHeader }));
  return sessionFrom(server, setCookie, me);
}

/** Invites the email to the team with the role, accepts the link, signs in. */
export async function invite(server: TestServer, owner: OperatorSession, teamId: bigint, email: string, role: Role, password = "another good password"): Promise<OperatorSession> {
  const inv = await owner.client(AccountService).createInvitation({ teamId, email, role });
  const { me, setCookie } = await withCookie((onHeader) => anonymous(server).acceptInvitation({ token: inv.token, name: email.split("@")[0]!, password }, { onHeader }));
  return sessionFrom(server, setCookie, me);
}
