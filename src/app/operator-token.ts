// The operator token protecting the admin listener: configured, or generated
// into the data directory on first start of the embedded default.
import { randomBytes, timingSafeEqual } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";

export async function loadOrCreateOperatorToken(configured: string | undefined, dataDir: string): Promise<{ token: string; created: boolean; file?: string }> {
  if (configured) return { token: configured, created: false };
  const file = join(dataDir, "operator-token");
  try {
    return { token: (await readFile(file, "utf8")).trim(), created: false, file };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const token = "op_" + randomBytes(32).toString("base64url");
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, token + "\n", { mode: 0o600 });
  return { token, created: true, file };
}

export function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
