// The size budget of the browser bundle an app gets for identity plus
// analytics (with crash capture and localStorage): bundled, minified and
// gzipped as a bundler would ship it. `npm run size -w @pulsebase/client`;
// the package test asserts the same budget in CI.
import { gzipSync } from "node:zlib";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

export const BUDGET_BYTES = 10 * 1024;

/** The SDK bundled for the browser and minified as an app's bundler would (esbuild, ES2020), from an entry's source. */
export async function minifiedBundle(entry = 'export * from "./index.ts";'): Promise<string> {
  const out = await build({
    stdin: { contents: entry, resolveDir: join(dirname(fileURLToPath(import.meta.url)), "../src"), loader: "ts" },
    bundle: true,
    minify: true,
    format: "esm",
    platform: "browser",
    target: "es2020",
    write: false,
  });
  return out.outputFiles[0]!.text;
}

export async function measureBrowserBundle(): Promise<{ minified: number; gzipped: number; code: string }> {
  const code = await minifiedBundle('export { createClient, createAnalytics, captureCrashes, webStorage } from "./index.ts";');
  return { minified: Buffer.byteLength(code), gzipped: gzipSync(code, { level: 9 }).byteLength, code };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const m = await measureBrowserBundle();
  console.log(`identity + analytics: ${m.minified} bytes minified, ${m.gzipped} bytes gzipped (budget ${BUDGET_BYTES})`);
  if (m.gzipped > BUDGET_BYTES) process.exit(1);
}
