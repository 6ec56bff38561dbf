// The layer rules of .dependency-cruiser.mjs (docs/architecture.md) on small
// trees written for the test: a clean one passes; a forbidden import and a
// cycle between folders (with no cycle between modules) each fail the check.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../..");
const dirs: string[] = [];

const clean: Record<string, string> = {
  "src/kernel/ids.ts": `export const newId = (): string => "id";\n`,
  "src/infra/store/store.ts": `import { newId } from "../../kernel/ids.js";\nexport const put = (): string => newId();\n`,
  "src/infra/log/log.ts": `import { put } from "../store/store.js";\nexport const log = (): string => put();\n`,
  "src/capabilities/notes/note-store.ts": `import { put } from "../../infra/store/store.js";\nexport const save = (): string => put();\n`,
  "src/capabilities/notes/notes-module.ts": `import { save } from "./note-store.js";\nexport const notesModule = { save };\n`,
  "src/capabilities/tags/tags-module.ts": `import { notesModule } from "../notes/notes-module.js";\nexport const tagsModule = { notes: notesModule };\n`,
  "src/transport/http/routes.ts": `import { notesModule } from "../../capabilities/notes/notes-module.js";\nexport const routes = [notesModule];\n`,
  "src/server/build.ts": `import { routes } from "../transport/http/routes.js";\nimport { tagsModule } from "../capabilities/tags/tags-module.js";\nexport const app = { routes, tagsModule };\n`,
};

/** Runs `depcruise` with the project's rules on a tree; answers the exit status and the names of the broken rules. */
function check(files: Record<string, string>): { status: number | null; rules: string[] } {
  const dir = mkdtempSync(join(tmpdir(), "pulsebase-layers-"));
  dirs.push(dir);
  const tsconfig = { compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", noEmit: true } };
  for (const [path, text] of Object.entries({ ...files, "tsconfig.json": JSON.stringify(tsconfig) })) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  // The report CI prints: one "error <rule>: ..." line per violation.
  const run = spawnSync(join(root, "node_modules/.bin/depcruise"), ["src", "--config", join(root, ".dependency-cruiser.mjs")], { cwd: dir, encoding: "utf8" });
  return { status: run.status, rules: [...new Set(Array.from(run.stdout.matchAll(/^\s*error ([\w-]+):/gm), (m) => m[1]!))].sort() };
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("layer rules", () => {
  it("pass on a tree that keeps them", () => {
    expect(check(clean)).toEqual({ status: 0, rules: [] });
  });

  it("fail on a capability importing the transport or another capability's internals", () => {
    const r = check({
      ...clean,
      "src/transport/rest/envelope.ts": `export const envelope = (s: string): string => s;\n`,
      "src/capabilities/notes/render.ts": `import { envelope } from "../../transport/rest/envelope.js";\nexport const n = envelope;\n`,
      "src/capabilities/tags/tag-store.ts": `import { save } from "../notes/note-store.js";\nexport const s = save;\n`,
    });
    expect(r.status).not.toBe(0);
    expect(r.rules).toEqual(["capability-not-transport-or-server", "capability-through-interface"]);
  });

  it("fail on a cycle between folders though no module imports itself", () => {
    const r = check({
      ...clean,
      // log -> store already; store -> log closes a folder cycle through other files.
      "src/infra/store/flush.ts": `import { log } from "../log/log.js";\nexport const flush = (): string => log();\n`,
    });
    expect(r.status).not.toBe(0);
    expect(r.rules).toEqual(["no-folder-cycles"]);
  });

  it("fail on the kernel importing a layer above it", () => {
    const r = check({ ...clean, "src/kernel/clock.ts": `import { put } from "../infra/store/store.js";\nexport const c = put;\n` });
    expect(r.status).not.toBe(0);
    // (store imports the kernel, so this is a folder cycle too)
    expect(r.rules).toEqual(["kernel-is-pure", "no-folder-cycles"]);
  });
});
