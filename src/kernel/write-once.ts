// Creates a file only if it does not exist yet, whole or not at all: the
// content goes to a temporary file first, which is then hard-linked to the
// name (link fails if the name exists, atomically). Of several processes
// creating the same file at once (two servers first starting on one data
// directory), one wins and the others read its complete content. On a
// filesystem without hard links an exclusive create is used instead (a
// reader may then see the file empty for an instant).
import { randomBytes } from "node:crypto";
import { link, unlink, writeFile } from "node:fs/promises";

/** True if this call created the file; false if it existed already. */
export async function writeFileOnce(file: string, data: string, mode = 0o600): Promise<boolean> {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  await writeFile(tmp, data, { mode, flag: "wx" });
  try {
    await link(tmp, file);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "ENOSYS") throw err;
  } finally {
    await unlink(tmp).catch(() => {});
  }
  try {
    await writeFile(file, data, { mode, flag: "wx" });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
}
