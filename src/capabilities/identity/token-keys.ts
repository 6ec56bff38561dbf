// JWT signing keys: a JSON file {"keys":[{"kid","secret","created_at"}]}.
// The first key signs; every key listed verifies, so rotating (adding a new
// key first and keeping the old one until its tokens expire) never logs a
// device out. The embedded default generates the file in the data directory.
import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { writeFileOnce } from "../../kernel/write-once.js";
import { dirname } from "node:path";

export interface SigningKey {
  kid: string;
  secret: Uint8Array;
  createdAt: string;
}

interface KeyFile {
  keys: { kid: string; secret: string; created_at: string }[];
}

export function newKey(): { kid: string; secret: string; created_at: string } {
  return {
    kid: randomBytes(6).toString("hex"),
    secret: randomBytes(32).toString("base64url"),
    created_at: new Date().toISOString(),
  };
}

export async function loadOrCreateKeys(file: string, create: boolean): Promise<SigningKey[]> {
  let parsed: KeyFile;
  try {
    parsed = JSON.parse(await readFile(file, "utf8")) as KeyFile;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT" || !create) {
      throw new Error(`cannot read JWT keys file ${file}: ${(err as Error).message}`, { cause: err });
    }
    parsed = { keys: [newKey()] };
    await mkdir(dirname(file), { recursive: true });
    // Another server starting at the same moment may have written its own
    // first: then that file's keys are everyone's.
    if (!(await writeFileOnce(file, JSON.stringify(parsed, null, 2)))) parsed = JSON.parse(await readFile(file, "utf8")) as KeyFile;
  }
  if (!Array.isArray(parsed.keys) || parsed.keys.length === 0) {
    throw new Error(`JWT keys file ${file} has no keys`);
  }
  return parsed.keys.map((k) => {
    const secret = Buffer.from(k.secret, "base64url");
    if (!k.kid || secret.length < 32) throw new Error(`JWT key ${k.kid} in ${file} must have a kid and a 32-byte secret`);
    return { kid: k.kid, secret: new Uint8Array(secret), createdAt: k.created_at };
  });
}

/** Adds a new signing key in front; older keys keep verifying. */
export async function rotateKeys(file: string, keep = 3): Promise<string> {
  const parsed = JSON.parse(await readFile(file, "utf8")) as KeyFile;
  const k = newKey();
  parsed.keys = [k, ...parsed.keys].slice(0, keep);
  await writeFile(file, JSON.stringify(parsed, null, 2), { mode: 0o600 });
  return k.kid;
}
