// The unit project (test/projects.ts) stays fast: none of its files imports,
// itself or through a local helper of test/, what starts a server, a
// database, NATS, sqld, a browser or a child process (UNIT_FORBIDDEN); every
// glob of the list still names a file. The rule itself is checked on small
// trees written for the test.
import { existsSync, globSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { UNIT_FORBIDDEN, UNIT_TESTS } from "../projects.js";

const root = resolve(import.meta.dirname, "../..");
const dirs: string[] = [];

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const IMPORT = /(?:^|[\s;])(?:import|export)\s+(?!type\s)(?:[^"'`;]*?\sfrom\s+)?["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/gm;

/** Module specifiers a file imports at run time (type-only imports left out). */
function importsOf(text: string): string[] {
  return Array.from(text.matchAll(IMPORT), (m) => (m[1] ?? m[2])!);
}

/**
 * The forbidden imports reachable from `file` (relative to `base`): its own
 * specifiers, and those of the local files under test/ it reaches (src/ files
 * are named, not followed: what the code under test imports is its business).
 * Each as "importer -> what".
 */
export function forbiddenImports(base: string, file: string, forbidden: readonly RegExp[] = UNIT_FORBIDDEN): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  const visit = (rel: string) => {
    if (seen.has(rel)) return;
    seen.add(rel);
    const text = readFileSync(join(base, rel), "utf8");
    for (const spec of importsOf(text)) {
      let name = spec;
      if (spec.startsWith(".")) {
        name = relative(base, resolve(base, dirname(rel), spec)).replace(/\.js$/, ".ts");
        if (!existsSync(join(base, name)) && existsSync(join(base, name.replace(/\.ts$/, ".js")))) name = name.replace(/\.ts$/, ".js");
      }
      if (forbidden.some((re) => re.test(name))) out.push(`${rel} -> ${name}`);
      else if (spec.startsWith(".") && name.startsWith("test/") && existsSync(join(base, name))) visit(name);
    }
  };
  visit(file);
  return out;
}

describe("the unit project", () => {
  const files = [...new Set(UNIT_TESTS.flatMap((g) => globSync(g, { cwd: root })))].sort();

  it("names files, each glob at least one", () => {
    for (const g of UNIT_TESTS) expect(globSync(g, { cwd: root }), g).not.toEqual([]);
    expect(files.length).toBeGreaterThan(20);
  });

  it("imports no server, database, NATS, sqld, browser or child-process helper", () => {
    expect(files.flatMap((f) => forbiddenImports(root, f))).toEqual([]);
  });
});

describe("the unit rule", () => {
  const tree = (files: Record<string, string>): string => {
    const dir = mkdtempSync(join(tmpdir(), "pulsebase-unit-rule-"));
    dirs.push(dir);
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    return dir;
  };

  it("passes a file importing vitest, src and a harmless local helper", () => {
    const dir = tree({
      "test/kernel/a.test.ts": `import { it } from "vitest";\nimport { f } from "../../src/kernel/f.js";\nimport { until } from "../helpers/until.js";\nimport type { S } from "../helpers/server.js";\n`,
      "test/helpers/until.ts": `export const until = 1;\n`,
      "src/kernel/f.ts": `import { spawn } from "node:child_process";\nexport const f = spawn;\n`,
    });
    expect(forbiddenImports(dir, "test/kernel/a.test.ts")).toEqual([]);
  });

  it("fails a file importing a server helper, directly or through a fixture, or a child process", () => {
    const dir = tree({
      "test/x/a.test.ts": `import { startTestServer } from "../helpers/server.js";\n`,
      "test/x/b.test.ts": `import { fixture } from "./fixture.js";\n`,
      "test/x/fixture.ts": `export { createTestDb as fixture } from "../helpers/db.js";\n`,
      // (the dynamic import spelt in two pieces so that this file does not import it)
      "test/x/c.test.ts": `import { spawn } from "node:child_process";\nconst pg = await ${"import"}("@electric-sql/pglite");\n`,
      "test/helpers/server.ts": ``,
      "test/helpers/db.ts": ``,
    });
    expect(forbiddenImports(dir, "test/x/a.test.ts")).toEqual(["test/x/a.test.ts -> test/helpers/server.ts"]);
    expect(forbiddenImports(dir, "test/x/b.test.ts")).toEqual(["test/x/fixture.ts -> test/helpers/db.ts"]);
    expect(forbiddenImports(dir, "test/x/c.test.ts")).toEqual(["test/x/c.test.ts -> node:child_process", "test/x/c.test.ts -> @electric-sql/pglite"]);
  });
});
