// Where the SDK keeps the consumer, its token, sessions and the unsent queue.
// A string key-value store whose calls may answer at once or with a promise:
// a synchronous store (localStorage, a file) is written before the page or
// process goes; an asynchronous one (IndexedDB, React Native's AsyncStorage)
// as soon as it can.

export type MaybePromise<T> = T | Promise<T>;

export interface StorageAdapter {
  get(key: string): MaybePromise<string | null | undefined>;
  set(key: string, value: string): MaybePromise<void>;
  remove(key: string): MaybePromise<void>;
}

/** Kept in memory only: lost with the page or process. */
export function memoryStorage(): StorageAdapter {
  const m = new Map<string, string>();
  return { get: (k) => m.get(k), set: (k, v) => void m.set(k, v), remove: (k) => void m.delete(k) };
}

/** Anything with getItem/setItem/removeItem: `localStorage`, `sessionStorage`, React Native's `AsyncStorage`. */
export interface KeyValueStore {
  getItem(key: string): MaybePromise<string | null>;
  setItem(key: string, value: string): MaybePromise<unknown>;
  removeItem(key: string): MaybePromise<unknown>;
}

/** `webStorage()` uses `localStorage`; `webStorage(AsyncStorage)` suits React Native. */
export function webStorage(store?: KeyValueStore): StorageAdapter {
  const s = store ?? (globalThis as unknown as { localStorage: KeyValueStore }).localStorage;
  return {
    get: (k) => s.getItem(k),
    set: (k, v) => s.setItem(k, v) as MaybePromise<void>,
    remove: (k) => s.removeItem(k) as MaybePromise<void>,
  };
}

/** React Native: pass `AsyncStorage` (from @react-native-async-storage/async-storage) or any store of that shape. */
export const reactNativeStorage = (store: KeyValueStore): StorageAdapter => webStorage(store);

interface IdbRequest { result: unknown; error: unknown; onsuccess: unknown; onerror: unknown; onupgradeneeded?: unknown }
interface IdbDatabase {
  createObjectStore(name: string): unknown;
  transaction(store: string, mode: string): {
    objectStore(name: string): Record<"get" | "put" | "delete", (...a: unknown[]) => IdbRequest>;
    oncomplete: unknown;
    onerror: unknown;
    onabort: unknown;
    error: unknown;
  };
}

/** IndexedDB (browsers): larger queues than localStorage allows; writes complete asynchronously. */
export function indexedDbStorage(name = "pulsebase"): StorageAdapter {
  const idb = (globalThis as unknown as { indexedDB: { open(n: string, v: number): IdbRequest } }).indexedDB;
  let db: Promise<IdbDatabase> | undefined;
  const open = () =>
    (db ??= new Promise<IdbDatabase>((resolve, reject) => {
      const r = idb.open(name, 1);
      r.onupgradeneeded = () => (r.result as IdbDatabase).createObjectStore("kv");
      r.onsuccess = () => resolve(r.result as IdbDatabase);
      r.onerror = () => reject(r.error);
    }));
  const op = <T>(mode: string, f: (s: Record<"get" | "put" | "delete", (...a: unknown[]) => IdbRequest>) => IdbRequest) =>
    open().then(
      (d) =>
        new Promise<T>((resolve, reject) => {
          const t = d.transaction("kv", mode);
          const r = f(t.objectStore("kv"));
          t.oncomplete = () => resolve(r.result as T);
          t.onerror = t.onabort = () => reject(t.error);
        }),
    );
  return {
    get: (k) => op<string | undefined>("readonly", (s) => s.get(k)),
    set: (k, v) => op<void>("readwrite", (s) => s.put(v, k)).then(() => undefined),
    remove: (k) => op<void>("readwrite", (s) => s.delete(k)).then(() => undefined),
  };
}

/** localStorage when the environment has a usable one, memory otherwise. */
export function defaultStorage(): StorageAdapter {
  try {
    // Only in a page: Node 25+ has a localStorage that warns without a file.
    const ls = (globalThis as unknown as { window?: { localStorage?: KeyValueStore } }).window?.localStorage;
    if (ls) {
      ls.setItem("pb:probe", "1");
      ls.removeItem("pb:probe");
      return webStorage(ls);
    }
  } catch {
    /* disabled (private mode, sandboxed frame) */
  }
  return memoryStorage();
}

/** Runs `f` on a value that may be a promise: at once when it is not (so synchronous stores stay synchronous). */
export function after<T, R>(v: MaybePromise<T>, f: (v: T) => MaybePromise<R>): MaybePromise<R> {
  return v instanceof Promise ? v.then(f) : f(v);
}
