// The README's walkthrough is the user's manual: every `$ ` command in it must
// run as written. This test starts `npm start` (the embedded default) in a
// scratch directory laid out like a checkout, runs each command with bash in
// order, and checks that every JSON key the README shows in a command's output
// is in the real output (and that no command answers an error the README does
// not show). `export X=<value>` lines copying a value from the output above
// take the real value of the same key.
import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { spawnServer, type ChildServer } from "../helpers/child-server.js";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";

const repo = resolve(import.meta.dirname, "../..");

interface Step {
  command: string;
  output: string;
}

/** The `$ ` commands of the README's walkthrough with the output shown under each. */
function walkthroughSteps(readme: string): Step[] {
  const start = readme.indexOf("## Walkthrough");
  const end = readme.indexOf("\n## ", start + 5);
  const section = readme.slice(start, end);
  const steps: Step[] = [];
  for (const block of section.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const lines = block[1]!.split("\n");
    let i = 0;
    while (i < lines.length) {
      if (!lines[i]!.startsWith("$ ")) {
        i++;
        continue;
      }
      // A command runs on until bash can parse it (quotes and `\` span lines).
      let command = lines[i]!.slice(2);
      i++;
      while ((command.endsWith("\\") || !parses(command)) && i < lines.length) command += "\n" + lines[i++];
      const output: string[] = [];
      while (i < lines.length && !lines[i]!.startsWith("$ ")) output.push(lines[i++]!);
      steps.push({ command, output: output.join("\n").trim() });
    }
  }
  return steps;
}

function parses(command: string): boolean {
  return spawnSync("bash", ["-n", "-c", command]).status === 0;
}

function jsonKeys(text: string): string[] {
  return [...new Set([...text.matchAll(/"([A-Za-z_][A-Za-z0-9_]*)"\s*:/g)].map((m) => m[1]!))];
}


let dir: string;
let server: ChildServer | undefined;
const ports = { https: 0, admin: 0 };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "pulsebase-readme-"));
  // A checkout as the user has it, with its own .data.
  for (const f of ["package.json", "buf.yaml", "buf.gen.yaml", "tsconfig.json", "proto", "gen", "src", "bin", "node_modules", "packages"]) {
    await symlink(join(repo, f), join(dir, f));
  }
  server = await spawnServer({ npmStartIn: dir });
  await server.ready();
  ports.https = server.https;
  ports.admin = server.admin;
}, 90_000);

afterAll(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

it("finds the walkthrough's commands", async () => {
  const steps = walkthroughSteps(await readFile(join(repo, "README.md"), "utf8"));
  expect(steps.length).toBeGreaterThan(15);
  expect(steps.some((s) => s.command.includes("\n"))).toBe(true);
});

it("runs every walkthrough command as written", async () => {
  const steps = walkthroughSteps(await readFile(join(repo, "README.md"), "utf8"));
  const envFile = join(dir, "walkthrough-env.sh");
  await writeFile(envFile, "");
  let previous: { doc: string; real: string } = { doc: "", real: "" };
  for (const step of steps) {
    // The README's ports are the defaults; this server listens on free ones.
    const command = step.command.replaceAll(":8443", `:${ports.https}`).replaceAll(":8444", `:${ports.admin}`);
    const copy = /^export (\w+)=([^\s$]+?)…?$/.exec(command.trim());
    if (copy) {
      // `export TOKEN=eyJ…`: the value shown is the example output's; take the
      // same key's value from the real output.
      const [, name, shown] = copy;
      const key = new RegExp(`"(\\w+)"\\s*:\\s*"${shown!.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`).exec(previous.doc)?.[1];
      expect(key, `where "${shown}" comes from in the README output above`).toBeDefined();
      const real = new RegExp(`"${key}"\\s*:\\s*"([^"]+)"`).exec(previous.real)?.[1];
      expect(real, `"${key}" in the real output: ${previous.real}`).toBeDefined();
      await writeFile(envFile, `export ${name}='${real}'\n`, { flag: "a" });
      continue;
    }
    if (/^export \w+=/.test(command.trim())) {
      await writeFile(envFile, command.trim() + "\n", { flag: "a" });
      continue;
    }
    const run = spawnSync("bash", ["-c", `set -eu; source ${envFile}; ${command}`], {
      cwd: dir,
      encoding: "utf8",
      timeout: 60_000,
      env: {
        ...process.env,
        PULSEBASE_ADMIN_PORT: String(ports.admin),
        PULSEBASE_OPERATOR_TOKEN: "",
        PULSEBASE_DATA_DIR: "",
      },
    });
    const real = run.stdout.trim();
    expect(run.status, `${command}\nstdout: ${real}\nstderr: ${run.stderr}`).toBe(0);
    for (const key of jsonKeys(step.output)) {
      expect(real, `${command}\nshows "${key}" in the README`).toContain(`"${key}"`);
    }
    if (!/"errors?"\s*:/.test(step.output)) {
      expect(real, `${command}\nanswers an error the README does not show`).not.toMatch(/^\{\s*"error"\s*:/);
      expect(real, `${command}\nanswers a validation error the README does not show`).not.toMatch(/^\{\s*"message"\s*:.*"errors"/s);
    }
    previous = { doc: step.output, real };
  }
}, 240_000);
