#!/usr/bin/env node
// The operator CLI. Runs dist/cli/cli.js, compiled ahead of time by
// tools/build-cli.js (at `npm install`), so no TypeScript compiler starts per
// call; a checkout whose CLI sources changed since that build is rebuilt
// first (a fraction of a second, once), and without esbuild the sources run
// through tsx. `load`, the load generator, lives outside the server's sources
// (tools/load) and always runs through tsx.
import nodeModule from "node:module";
import { readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

// V8 keeps the compiled CLI on disk, beside the build in the checkout (not in
// a shared temporary folder another user could prepare): later calls skip parsing it.
nodeModule.enableCompileCache?.(join(ROOT, "dist/cli/compile-cache"));
const OUT = join(ROOT, "dist/cli/cli.js");

/** Whether dist/cli/cli.js exists and is newer than every source it was built from. */
function built() {
  try {
    const at = statSync(OUT).mtimeMs;
    const inputs = JSON.parse(readFileSync(join(ROOT, "dist/cli/inputs.json"), "utf8"));
    return inputs.every((p) => statSync(join(ROOT, p)).mtimeMs <= at);
  } catch {
    return false; // missing, or a source that moved: build again
  }
}

async function viaTsx(entry) {
  const { register } = await import("tsx/esm/api");
  register();
  await import(entry);
}

if (process.argv[2] === "load") await viaTsx("../tools/load/cli.ts");
else {
  let ready = built();
  if (!ready) {
    try {
      await (await import("../tools/build-cli.js")).buildCli();
      ready = true;
    } catch {
      // No esbuild (an install without dev dependencies): run the sources.
    }
  }
  if (ready) await import(pathToFileURL(OUT).href);
  else await viaTsx("../src/server/cli.ts");
}
