// What a function sees of the request headers.
import { describe, expect, it } from "vitest";
import { functionHeaders } from "../../../src/capabilities/functions/http-request.js";

describe("functionHeaders", () => {
  it("lower-cases names, strips credentials and internal headers, and keeps __proto__ as data", () => {
    // JSON.parse makes __proto__ an own key, as a header parser does
    const h = functionHeaders(
      JSON.parse('{"Accept":"application/json","cookie":"s=1","Authorization":"Bearer t","proxy-authorization":"x","X-Pulsebase-Internal":"1","__proto__":"not a prototype","x-trace":"abc"}') as Record<string, string>,
    );
    expect(JSON.parse(JSON.stringify(h))).toEqual(JSON.parse('{"accept":"application/json","__proto__":"not a prototype","x-trace":"abc"}'));
    expect(Object.keys(h).sort()).toEqual(["__proto__", "accept", "x-trace"]);
  });
});
