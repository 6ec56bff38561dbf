// Cookie tossing (issue #28, point 8), over raw HTTP on a real server: the
// session cookie is `__Host-pb_session`; a request carrying two session
// cookies (the name twice, or the old `pb_session` beside it, whichever
// comes first) is refused 401 and told to sign in again, and the answer
// removes them; the old name alone is no session.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { createModules } from "../../../src/server/modules.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { invite, setupOwner, type OperatorSession } from "./operator-session.js";

let s: TestServer;
let owner: OperatorSession;
let mallory: OperatorSession;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  owner = await setupOwner(s);
  mallory = await invite(s, owner, owner.me.teams[0]!.teamId, "mallory@example.com", Role.DEVELOPER);
});
afterAll(() => s.close());

const secretOf = (o: OperatorSession) => o.cookie.slice(o.cookie.indexOf("=") + 1);

async function getMe(cookie: string, path = "/pulsebase.admin.v1.AccountService/GetMe") {
  const res = await fetch(s.adminUrl + path, { method: "POST", headers: { "content-type": "application/json", cookie }, body: "{}" });
  return { status: res.status, requestId: res.headers.get("x-request-id"), setCookies: res.headers.getSetCookie(), body: (await res.json()) as Record<string, unknown> };
}

describe("the console session cookie", () => {
  it("is __Host-pb_session: Secure, Path=/, no Domain, HttpOnly, SameSite=Strict", () => {
    expect(owner.setCookie).toMatch(/^__Host-pb_session=[\w-]{40,};/);
    for (const flag of ["HttpOnly", "Secure", "SameSite=Strict", "Path=/;"]) expect(owner.setCookie).toContain(flag);
    expect(owner.setCookie).not.toMatch(/domain=/i);
  });

  it("works alone", async () => {
    const r = await getMe(owner.cookie);
    expect(r.status).toBe(200);
    expect(r.body.email).toBe("owner@example.com");
    expect(r.setCookies).toEqual([]);
  });

  it.each([
    ["a planted old-name session before ours", () => `pb_session=${secretOf(mallory)}; ${owner.cookie}`],
    ["a junk old-name cookie after ours", () => `${owner.cookie}; pb_session=junk`],
    ["ours twice (another session first)", () => `${mallory.cookie}; ${owner.cookie}`],
    ["ours twice, same value", () => `${owner.cookie}; ${owner.cookie}`],
    ["two old-name cookies", () => `pb_session=${secretOf(mallory)}; pb_session=${secretOf(owner)}`],
  ])("refuses %s: 401, sign in again, both cleared", async (_name, cookie) => {
    const r = await getMe(cookie());
    expect(r.status).toBe(401);
    expect(r.requestId).toBeTruthy();
    expect(r.body).toMatchObject({ code: "unauthenticated", message: expect.stringMatching(/more than one console session cookie.*Sign in again.*clear this site's cookies/s) });
    expect(JSON.stringify(r.body)).not.toContain("mallory");
    expect(r.setCookies).toContain("__Host-pb_session=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0");
    for (const p of ["/", "/pulsebase.admin.v1.AccountService", "/pulsebase.admin.v1.AccountService/", "/pulsebase.admin.v1.AccountService/GetMe"]) {
      expect(r.setCookies).toContain(`pb_session=; Path=${p}; Secure; SameSite=Strict; Max-Age=0`);
    }
  });

  it("refuses the conflict on anonymous methods too (sign-in), and on any path", async () => {
    const res = await fetch(`${s.adminUrl}/pulsebase.admin.v1.AccountService/Login`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie: `pb_session=x; ${owner.cookie}` },
      body: JSON.stringify({ email: "owner@example.com", password: "correct horse battery" }),
    });
    expect(res.status).toBe(401);
    expect(res.headers.getSetCookie().some((c) => c.startsWith("__Host-pb_session=;"))).toBe(true);
    const page = await fetch(`${s.adminUrl}/apps/1`, { headers: { cookie: `${owner.cookie}; pb_session=x` } });
    expect(page.status).toBe(200);
    expect(page.headers.getSetCookie()).toContain("pb_session=; Path=/apps; Secure; SameSite=Strict; Max-Age=0");
  });

  it("the old name alone is no session (and is removed)", async () => {
    const r = await getMe(`pb_session=${secretOf(owner)}`);
    expect(r.status).toBe(401);
    expect(r.body).toMatchObject({ code: "unauthenticated", message: expect.stringMatching(/Sign in first/) });
    expect(r.setCookies).toContain("pb_session=; Path=/; Secure; SameSite=Strict; Max-Age=0");
  });
});
