// BlobStore over a local directory (the default). Writes go to a temporary
// file and are renamed into place, so a reader never sees half a file.
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { assertBlobKey, type BlobStore } from "./blob-store.js";

export function createDirBlobStore(rootDir: string): BlobStore {
  const pathOf = (key: string) => {
    assertBlobKey(key);
    return join(rootDir, key);
  };
  return {
    async put(key, data) {
      const path = pathOf(key);
      await mkdir(dirname(path), { recursive: true });
      const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
      await writeFile(tmp, data);
      await rename(tmp, path);
    },
    async get(key) {
      try {
        return new Uint8Array(await readFile(pathOf(key)));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw err;
      }
    },
    async delete(key) {
      await rm(pathOf(key), { force: true });
    },
  };
}
