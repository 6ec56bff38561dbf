// TLS material: from configured files, or (embedded default) a self-signed
// certificate generated into the data directory on first start.
import { mkdir, readFile } from "node:fs/promises";
import { writeFileOnce } from "../kernel/write-once.js";
import { sleep } from "../kernel/retry.js";
import { join } from "node:path";
import { generate } from "selfsigned";

export interface TlsMaterial {
  key: string;
  cert: string;
}

export async function loadOrCreateTls(opts: { certFile?: string; keyFile?: string; dataDir: string }): Promise<TlsMaterial> {
  if (opts.certFile && opts.keyFile) {
    return { cert: await readFile(opts.certFile, "utf8"), key: await readFile(opts.keyFile, "utf8") };
  }
  const dir = join(opts.dataDir, "tls");
  const certFile = join(dir, "cert.pem");
  const keyFile = join(dir, "key.pem");
  try {
    return { cert: await readFile(certFile, "utf8"), key: await readFile(keyFile, "utf8") };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const notAfter = new Date();
  notAfter.setFullYear(notAfter.getFullYear() + 5);
  const pems = await generate([{ name: "commonName", value: "localhost" }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    notAfterDate: notAfter,
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
      { name: "extKeyUsage", serverAuth: true },
      { name: "subjectAltName", altNames: [{ type: 2, value: "localhost" }, { type: 7, ip: "127.0.0.1" }, { type: 7, ip: "::1" }] },
    ],
  });
  await mkdir(dir, { recursive: true });
  // The key file decides which of two servers starting at once on a new
  // directory generates the pair; only its winner writes the certificate, and
  // the other waits for it, so both serve the same pair.
  if (await writeFileOnce(keyFile, pems.private)) {
    await writeFileOnce(certFile, pems.cert, 0o644);
    return { cert: pems.cert, key: pems.private };
  }
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return { cert: await readFile(certFile, "utf8"), key: await readFile(keyFile, "utf8") };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    if (Date.now() > deadline) throw new Error(`${keyFile} exists without ${certFile}: remove the ${dir} directory to generate a new pair`);
    await sleep(50);
  }
}
