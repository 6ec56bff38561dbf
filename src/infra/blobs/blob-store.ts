// Where attached files live. The analytics service only needs put/get/delete
// by key, so an object store (S3-compatible) can replace the directory store
// later without touching callers.
export interface BlobStore {
  /** Stores data under key, replacing what was there (idempotent retries). */
  put(key: string, data: Uint8Array): Promise<void>;
  /** The stored bytes, or undefined when there is no such key. */
  get(key: string): Promise<Uint8Array | undefined>;
  delete(key: string): Promise<void>;
}

/** Keys are path-like ("logs/12/b-abc/3"); only these characters are allowed. */
export function assertBlobKey(key: string): void {
  if (!/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/.test(key) || key.split("/").some((p) => p === "." || p === "..")) {
    throw new Error(`invalid blob key: ${key}`);
  }
}
