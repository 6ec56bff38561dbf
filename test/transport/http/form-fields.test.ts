import { describe, expect, it } from "vitest";
import { FormBuilder, splitFieldName } from "../../../src/transport/http/form-fields.js";
import { Violations } from "../../../src/kernel/errors.js";

describe("multipart bracket fields", () => {
  it("splits bracket names", () => {
    expect(splitFieldName("events[0][metadata][screen]")).toEqual(["events", "0", "metadata", "screen"]);
    expect(splitFieldName("name")).toEqual(["name"]);
    expect(splitFieldName("a[b")).toBeUndefined();
  });

  it("builds nested objects and arrays", () => {
    const v = new Violations();
    const f = new FormBuilder(v);
    f.add("events[1][name]", "b");
    f.add("events[0][name]", "a");
    f.add("events[0][metadata][screen]", "home");
    f.add("tags[]", "x");
    f.add("tags[]", "y");
    expect(f.build()).toEqual({ events: [{ name: "a", metadata: { screen: "home" } }, { name: "b" }], tags: ["x", "y"] });
    expect(v.empty).toBe(true);
  });

  it("reports gaps, duplicates and value/object clashes", () => {
    const v = new Violations();
    const f = new FormBuilder(v);
    f.add("logs[0][message]", "a");
    f.add("logs[2][message]", "c");
    f.add("name", "x");
    f.add("name", "y");
    f.add("name[sub]", "z");
    f.build();
    expect(Object.keys(v.fields).sort()).toEqual(["logs", "name"]);
  });

  it("keeps __proto__ and constructor field names as ordinary keys (no prototype pollution)", () => {
    const v = new Violations();
    const f = new FormBuilder(v);
    f.add("events[0][metadata][__proto__][polluted]", "yes");
    f.add("__proto__[polluted]", "yes");
    f.add("constructor[prototype][polluted]", "yes");
    const out = f.build();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.keys(out).sort()).toEqual(["__proto__", "constructor", "events"]);
    expect(v.empty).toBe(true);
  });
});
