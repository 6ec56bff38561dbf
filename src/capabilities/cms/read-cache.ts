// Per-process cache of the read side, per application: the content type
// definitions with their published counts, and rendered responses of the
// request shapes included in the plan. Every content change of an
// application drops its slot (invalidate); a read that started before the
// change writes into the dropped slot, so it can never resurrect stale data.
import type { ContentTypeDef } from "./content-type-def.js";
import type { ContentResponse } from "../../../gen/pulsebase/cms/v1/content_pb.js";

export interface ReadState {
  bySlug: Map<string, ContentTypeDef>;
  byId: Map<number, ContentTypeDef>;
  /** published entries per content type id */
  published: Map<number, number>;
}

export interface CachedResponse {
  message: ContentResponse;
  etag: string;
  /** the response headers (Cache-Control, ETag, Vary), built once per entry, sorted by name */
  headers: readonly (readonly [string, string])[];
}

export class AppSlot {
  state: Promise<ReadState> | undefined;
  /** state once loaded (for the synchronous REST fast path) */
  ready: ReadState | undefined;
  readonly responses = new Map<string, CachedResponse>();
  constructor(readonly expiresAt: number) {}
}

export interface ReadCacheOptions {
  /** rendered responses kept per application (oldest dropped first) */
  maxResponsesPerApp?: number;
  /** safety net when cross-process invalidation is not wired */
  ttlMs?: number;
}

export class ReadCache {
  private readonly slots = new Map<number, AppSlot>();
  private readonly max: number;
  private readonly ttl: number;

  constructor(opts: ReadCacheOptions = {}) {
    this.max = opts.maxResponsesPerApp ?? 5000;
    this.ttl = opts.ttlMs ?? 300_000;
  }

  slot(appId: number): AppSlot {
    let s = this.slots.get(appId);
    if (!s || s.expiresAt < Date.now()) {
      s = new AppSlot(Date.now() + this.ttl);
      this.slots.set(appId, s);
    }
    return s;
  }

  put(slot: AppSlot, key: string, value: CachedResponse): void {
    if (slot.responses.size >= this.max) {
      const first = slot.responses.keys().next();
      if (!first.done) slot.responses.delete(first.value);
    }
    slot.responses.set(key, value);
  }

  /** Drops everything cached for the application (call on every change). */
  invalidate(appId: number): void {
    this.slots.delete(appId);
  }

  clear(): void {
    this.slots.clear();
  }
}
