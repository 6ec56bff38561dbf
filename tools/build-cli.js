// Compiles the operator CLI (src/server/cli.ts and what it imports) ahead of
// time into one JavaScript file, dist/cli/cli.js, so that `npx pulsebase`
// starts no TypeScript compiler (`npm run cli:build`; `npm install` runs it
// from `prepare`). dist/cli/inputs.json lists the sources it was built from:
// bin/pulsebase.js rebuilds when one of them is newer than the build (an
// edited checkout), and runs the sources through tsx when esbuild is missing.
// Plain JavaScript so that it runs without tsx.
import { mkdir, rename, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const CLI_OUT = join(ROOT, "dist/cli/cli.js");
export const CLI_INPUTS = join(ROOT, "dist/cli/inputs.json");

/** Builds dist/cli/cli.js; written under a temporary name first, so a CLI started meanwhile never loads half a file. */
export async function buildCli() {
  const { build } = await import("esbuild");
  const out = await build({
    absWorkingDir: ROOT,
    entryPoints: ["src/server/cli.ts"],
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    // CommonJS dependencies bundled into an ES module still call require().
    banner: { js: 'import { createRequire as __pbRequire } from "node:module"; const require = __pbRequire(import.meta.url);' },
    metafile: true,
    write: false,
    logLevel: "silent",
    legalComments: "none",
  });
  await mkdir(dirname(CLI_OUT), { recursive: true });
  const tag = `${process.pid}-${Date.now()}`;
  // The sources, and what decides the bundled dependencies' code (the lockfile) and how they are bundled (this file):
  // a change to any of them makes bin/pulsebase.js build again.
  const inputs = [...Object.keys(out.metafile.inputs).filter((p) => !p.startsWith("node_modules/")), "package-lock.json", "tools/build-cli.js"];
  await writeFile(`${CLI_OUT}.${tag}`, out.outputFiles[0].contents);
  await writeFile(`${CLI_INPUTS}.${tag}`, JSON.stringify(inputs));
  await rename(`${CLI_OUT}.${tag}`, CLI_OUT);
  await rename(`${CLI_INPUTS}.${tag}`, CLI_INPUTS);
  return { file: CLI_OUT, inputs: inputs.length, bytes: out.outputFiles[0].contents.byteLength };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const r = await buildCli();
    console.log(`operator CLI compiled: ${r.file} (${Math.round(r.bytes / 1024)} KiB from ${r.inputs} sources)`);
  } catch (err) {
    // An install without dev dependencies has no esbuild: the CLI then runs its sources through tsx.
    if (err?.code !== "ERR_MODULE_NOT_FOUND") throw err;
    console.log("operator CLI not compiled (no esbuild): npx pulsebase runs its TypeScript sources through tsx");
  }
}
