// errorDetailOf: the error parts an invocation record carries
// (docs/functions.md, "Debugging: errors and logs").
import { describe, expect, it } from "vitest";
import { errorDetailOf } from "../../../src/capabilities/functions/function-runtime.js";

describe("errorDetailOf", () => {
  it("takes a thrown Error's parts as the sandbox read them, whatever its name", () => {
    const stack = "Payment Error: card: declined\n    at pay (shop@v2.js:3:11)\n    at <platform>";
    expect(errorDetailOf({ error: "Payment Error: card: declined", errorName: "Payment Error", errorMessage: "card: declined", errorStack: stack }, "error")).toEqual({
      name: "Payment Error",
      message: "card: declined",
      stack,
    });
  });

  it("splits a text without parts at its first 'Name: ', else keeps it whole; no stack", () => {
    expect(errorDetailOf({ error: "RangeError: x: y" }, "error")).toEqual({ name: "RangeError", message: "x: y", stack: "" });
    expect(errorDetailOf({ error: 'Uncaught "x"' }, "error")).toEqual({ name: "", message: 'Uncaught "x"', stack: "" });
    expect(errorDetailOf({ error: "timed out after 50 ms" }, "timeout")).toEqual({ name: "", message: "timed out after 50 ms", stack: "" });
    expect(errorDetailOf({ error: "Error: x", errorName: "Error", errorMessage: "x", errorStack: "s" }, "ok")).toEqual({ name: "", message: "", stack: "" });
  });
});
