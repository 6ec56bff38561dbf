// The size budget of the browser bundle an app gets for identity plus
// analytics (with crash capture and localStorage): bundled, minified and
// gzipped as a bundler would ship it. `npm run size -w @pulsebase/client`;
// the package test asserts the same budget in CI.
import { gzipSync } from "node:zlib";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

export const BUDGET_BYTES = 10 * 1024;

export async function measureBrowserBundle(): Promise<{ minified: number; gzipped: number; code: string }> {
  const out = await build({
    stdin: {
      contents: 'export { createClient, createAnalytics, captureCrashes, webStorage } from "./index.ts";',
      resolveDir: join(dirname(fileURLToPath(import.meta.url)), "../src"),
      loader: "ts",
    },
    bundle: true,
    minify: true,
    format: "esm",
    platform: "browser",
    target: "es2020",
    write: false,
  });
  const code = out.outputFiles[0]!.text;
  return { minified: Buffer.byteLength(code), gzipped: gzipSync(code, { level: 9 }).byteLength, code };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const m = await measureBrowserBundle();
  console.log(`identity + analytics: ${m.minified} bytes minified, ${m.gzipped} bytes gzipped (budget ${BUDGET_BYTES})`);
  if (m.gzipped > BUDGET_BYTES) process.exit(1);
}
