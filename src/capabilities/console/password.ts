// Password hashing with node:crypto's scrypt (memory-hard; no native add-on
// to install). Stored as scrypt$N$r$p$salt$hash (base64url), so the cost can
// rise later without invalidating older hashes.
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from "node:crypto";

const N = 1 << 15;
const R = 8;
const P = 1;
const KEY_LEN = 32;
/** Passwords shorter than this are refused (NIST SP 800-63B asks for 8). */
export const MIN_PASSWORD_LENGTH = 10;
/** Longer ones are refused too: hashing cost should not be the caller's choice. */
export const MAX_PASSWORD_LENGTH = 200;

function scrypt(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  const opts: ScryptOptions = { N: n, r, p, maxmem: 256 * n * r + 1024 * 1024 };
  return new Promise((resolve, reject) => scryptCb(password.normalize("NFKC"), salt, KEY_LEN, opts, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, N, R, P);
  return `scrypt$${N}$${R}$${P}$${salt.toString("base64url")}$${key.toString("base64url")}`;
}

export async function verifyPassword(password: string, stored: string | null | undefined): Promise<boolean> {
  if (!stored) {
    // Same work as a real check: a missing account answers as slowly as a wrong password.
    await scrypt(password, Buffer.alloc(16), N, R, P);
    return false;
  }
  const [alg, n, r, p, salt, hash] = stored.split("$");
  if (alg !== "scrypt" || !n || !r || !p || !salt || !hash) return false;
  const want = Buffer.from(hash, "base64url");
  const got = await scrypt(password, Buffer.from(salt, "base64url"), Number(n), Number(r), Number(p));
  return got.length === want.length && timingSafeEqual(got, want);
}
