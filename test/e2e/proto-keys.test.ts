// A query parameter named "__proto__" reaches a function as a key
// like any other (issue #28): the REST passthrough once assigned query keys
// with `obj[key] = value`, which drops a string under "__proto__", while
// Connect and fromBinary keep it. The same request must look the same to
// the function whichever way it came.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let token: string;

async function admin(path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${s.adminUrl}/${path}`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${s.operatorToken}` }, body: JSON.stringify(body) });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`${path} ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  const app = await s.createApp("proto-keys");
  token = (await s.register(app.appKey)).token;
  const fn = await admin("pulsebase.admin.v1.FunctionService/CreateFunction", {
    appId: String(app.appId),
    name: "keys",
    code: `export default async function (req) {
      return { status: 200, body: {
        query: Object.entries(req.query),
        protoIsObject: Object.getPrototypeOf(req.query) === Object.prototype || Object.getPrototypeOf(req.query) === null,
      } };
    }`,
    timeoutMs: 5000,
  });
  await admin("pulsebase.admin.v1.FunctionService/CreateHttpTrigger", { functionId: fn.id, slug: "keys", enabled: true, auth: "consumer" });
}, 120_000);

afterAll(async () => {
  await s?.close();
});

describe("keys named __proto__ on the REST passthrough", () => {
  it("a query parameter named __proto__ reaches the function as an own entry", async () => {
    const res = await s.fetch("/api/fn/keys?__proto__=x&plan=pro", { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.query).toEqual([["__proto__", "x"], ["plan", "pro"]]);
    expect(body.protoIsObject).toBe(true);
  });
});
