// Two servers first starting at the same moment on one new data directory
// must end up with one set of signing keys and one operator token, not each
// its own (tokens signed by one would fail on the other).
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { loadOrCreateOperatorToken } from "../../src/server/operator-token.js";
import { loadOrCreateTls } from "../../src/server/tls.js";
import { loadOrCreateKeys } from "../../src/capabilities/identity/token-keys.js";
import { writeFileOnce } from "../../src/kernel/write-once.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "pulsebase-once-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

it("lets exactly one of many concurrent writers create the file, whole", async () => {
  const file = join(dir, "f");
  const contents = Array.from({ length: 20 }, (_, i) => `writer ${i} `.repeat(5000));
  const won = await Promise.all(contents.map((c) => writeFileOnce(file, c)));
  expect(won.filter(Boolean)).toHaveLength(1);
  expect(await readFile(file, "utf8")).toBe(contents[won.indexOf(true)]);
  expect(await readdir(dir)).toEqual(["f"]);
});

it("gives concurrent first starts the same signing keys and the same operator token", async () => {
  const keys = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateKeys(join(dir, "jwt-keys.json"), true)));
  expect(new Set(keys.map((k) => k[0]!.kid)).size).toBe(1);
  const tokens = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateOperatorToken(undefined, dir)));
  expect(new Set(tokens.map((t) => t.token)).size).toBe(1);
  expect(tokens.filter((t) => t.created)).toHaveLength(1);
  expect((await readFile(join(dir, "operator-token"), "utf8")).trim()).toBe(tokens[0]!.token);
  // The generated certificate and key: one pair for all, the key with its own certificate.
  const pairs = await Promise.all(Array.from({ length: 4 }, () => loadOrCreateTls({ dataDir: dir })));
  expect(new Set(pairs.map((p) => p.cert)).size).toBe(1);
  expect(new Set(pairs.map((p) => p.key)).size).toBe(1);
  expect(await readFile(join(dir, "tls", "cert.pem"), "utf8")).toBe(pairs[0]!.cert);
});
