// A query parameter named "__proto__" reaches a function as a key
// like any other (issue #28): the REST passthrough once assigned query keys
// with `obj[key] = value`, which drops a string under "__proto__", while
// Connect and fromBinary keep it. The same request must look the same to
// the function whichever way it came.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createModules } from "../../src/server/modules.js";
import { deployHttpFunction, startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let token: string;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  const app = await s.createApp("proto-keys");
  token = (await s.register(app.appKey)).token;
  await deployHttpFunction(
    s,
    app.appId,
    "keys",
    `export default async function (req) {
      return { status: 200, body: {
        query: Object.entries(req.query),
        protoIsObject: Object.getPrototypeOf(req.query) === Object.prototype || Object.getPrototypeOf(req.query) === null,
      } };
    }`,
  );
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
