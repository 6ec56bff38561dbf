import { describe, expect, it } from "vitest";
import { turnBatch } from "../../../src/transport/call/turn-batch.js";

const nextTurn = () => new Promise((r) => setImmediate(r));

describe("turnBatch", () => {
  it("runs the tasks queued in one turn together, in order, after the current code", async () => {
    const seen: string[] = [];
    const later = turnBatch(() => {});
    later(() => seen.push("a"));
    later(() => seen.push("b"));
    seen.push("now");
    expect(seen).toEqual(["now"]);
    await nextTurn();
    expect(seen).toEqual(["now", "a", "b"]);
    // a task queued by a task runs in the next turn, not in the same drain
    later(() => later(() => seen.push("d")));
    later(() => seen.push("c"));
    await nextTurn();
    expect(seen).toEqual(["now", "a", "b", "c"]);
    await nextTurn();
    expect(seen.at(-1)).toBe("d");
  });

  it("hands a throwing task to onError and runs the rest", async () => {
    const errors: unknown[] = [];
    const seen: number[] = [];
    const later = turnBatch((e) => errors.push(e));
    later(() => seen.push(1));
    later(() => {
      throw new Error("boom");
    });
    later(() => seen.push(3));
    await nextTurn();
    expect(seen).toEqual([1, 3]);
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toBe("boom");
  });
});
