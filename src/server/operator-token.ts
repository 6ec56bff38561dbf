// The operator token protecting the admin listener: configured, or generated
// into the data directory on first start of the embedded default.
import { randomBytes } from "node:crypto";
import { mkdir, readFile } from "node:fs/promises";
import { writeFileOnce } from "../kernel/write-once.js";
import { dirname, join } from "node:path";

export function operatorTokenFile(dataDir: string): string {
  return join(dataDir, "operator-token");
}

/** The token generated into the data directory, or undefined when there is none. */
export async function readOperatorToken(dataDir: string): Promise<string | undefined> {
  try {
    return (await readFile(operatorTokenFile(dataDir), "utf8")).trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

export async function loadOrCreateOperatorToken(configured: string | undefined, dataDir: string): Promise<{ token: string; created: boolean; file?: string }> {
  if (configured) return { token: configured, created: false };
  const file = operatorTokenFile(dataDir);
  const existing = await readOperatorToken(dataDir);
  if (existing) return { token: existing, created: false, file };
  const token = "op_" + randomBytes(32).toString("base64url");
  await mkdir(dirname(file), { recursive: true });
  // Of two servers starting at once on a new directory, one writes and the
  // other reads what it wrote.
  if (!(await writeFileOnce(file, token + "\n"))) {
    const theirs = await readOperatorToken(dataDir);
    if (!theirs) throw new Error(`${file} is empty: remove it to generate a new operator token`);
    return { token: theirs, created: false, file };
  }
  return { token, created: true, file };
}
