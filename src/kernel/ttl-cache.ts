// A small bounded cache with per-entry expiry (Map keeps insertion order, so
// the oldest entry is evicted first when full).
export class TtlCache<K, V> {
  private readonly map = new Map<K, { v: V; exp: number }>();
  constructor(private readonly ttlMs: number, private readonly max = 10_000) {}

  get(key: K): V | undefined {
    const e = this.map.get(key);
    if (!e) return undefined;
    if (e.exp <= Date.now()) {
      this.map.delete(key);
      return undefined;
    }
    return e.v;
  }

  set(key: K, v: V): void {
    if (this.map.size >= this.max) {
      const first = this.map.keys().next();
      if (!first.done) this.map.delete(first.value);
    }
    this.map.set(key, { v, exp: Date.now() + this.ttlMs });
  }

  delete(key: K): void {
    this.map.delete(key);
  }

  /** Drops every entry matching the predicate. */
  deleteWhere(pred: (v: V, k: K) => boolean): void {
    for (const [k, e] of this.map) if (pred(e.v, k)) this.map.delete(k);
  }

  clear(): void {
    this.map.clear();
  }
}
