// Identity: registers the device as a consumer once, keeps the consumer and
// its token in the storage adapter, re-issues the token on a 401 (sending the
// device id, so strict token mode works too), registers again when the
// consumer is gone, and changes the user through the update endpoint.
import { PlatformError, ValidationError } from "./errors.js";
import { send, type FetchLike, type HttpResponse, type RequestOptions } from "./http.js";
import { randomId } from "./ids.js";
import { after, defaultStorage, type StorageAdapter } from "./storage.js";

export interface DeviceInfo {
  /** Stable id of this installation; generated and stored when omitted. */
  deviceId?: string;
  deviceModel?: string;
  os?: string;
  /** ISO 3166-1 alpha-2; default: the region of the locale. */
  country?: string;
  /** ISO 639-1; default: the language of the locale. */
  language?: string;
}

export interface ClientOptions {
  /** The public listener, e.g. `https://api.example.com`. */
  baseUrl: string;
  appKey: string;
  /** Default: localStorage in a page, memory elsewhere (use fileStorage in Node, reactNativeStorage in React Native). */
  storage?: StorageAdapter;
  fetch?: FetchLike;
  /** Per request (default 15 s). */
  timeoutMs?: number;
  /** The app's user; default: the device id (an anonymous user per device). */
  userId?: string;
  userEmail?: string;
  device?: DeviceInfo;
}

export interface UserUpdate {
  userId?: string;
  userEmail?: string;
  country?: string;
  language?: string;
}

export interface Identity {
  consumerId: number;
  token: string;
  deviceId: string;
  userId: string;
  userEmail?: string;
  deviceModel: string;
  os: string;
  country: string;
  language: string;
  /** A user change not yet accepted by the server. */
  pending?: UserUpdate;
}

export interface PulsebaseClient {
  readonly appKey: string;
  readonly baseUrl: string;
  readonly storage: StorageAdapter;
  readonly fetch: FetchLike | undefined;
  readonly timeoutMs: number | undefined;
  /** The consumer, registering the device first if it has none; applies a pending user change. */
  ready(): Promise<Identity>;
  /** The stored consumer, if it was loaded. */
  readonly identity: Identity | undefined;
  /** An authenticated request to the platform API; a 401 re-issues the token and retries once. */
  request<T>(path: string, o?: RequestOptions): Promise<HttpResponse<T>>;
  /**
   * For transports that see a refused token outside `request()` (the realtime
   * socket's 4001): re-issues the token when `failed` is still the current one
   * (registering again when the consumer is gone), shared with concurrent
   * 401s, and returns the identity with the new token.
   */
  renewToken(failed: string): Promise<Identity>;
  /** Changes the user (PATCH /api/consumer/{id}); kept and retried if the server cannot be reached. */
  setUser(u: UserUpdate): Promise<void>;
  /** Forgets the consumer, its token and the device id: the next use registers a new device. */
  reset(): Promise<void>;
}

type Registration = Omit<Identity, "consumerId" | "token"> & Partial<Pick<Identity, "consumerId" | "token">>;

function locale(): string[] {
  const g = globalThis as unknown as { navigator?: { language?: string } };
  let l = g.navigator?.language;
  try {
    l ||= Intl.DateTimeFormat().resolvedOptions().locale;
  } catch {
    /* no Intl */
  }
  return (l || "en").split(/[-_]/);
}

function platform(): [string, string] {
  const g = globalThis as unknown as { navigator?: { platform?: string; userAgentData?: { platform?: string } }; process?: { platform?: string; version?: string }; document?: unknown };
  if (g.document && g.navigator) return ["browser", g.navigator.userAgentData?.platform || g.navigator.platform || "web"];
  if (g.process?.platform) return [`node ${g.process.version}`, g.process.platform];
  return ["unknown", "unknown"];
}

const defined = (u: UserUpdate): UserUpdate => JSON.parse(JSON.stringify(u));
const userBody = (u: UserUpdate) => ({ user_id: u.userId, user_email: u.userEmail, country: u.country, language: u.language });

export function createClient(opts: ClientOptions): PulsebaseClient {
  const storage = opts.storage ?? defaultStorage();
  const cfg = { baseUrl: opts.baseUrl, fetch: opts.fetch, timeoutMs: opts.timeoutMs };
  const key = `pb:${opts.appKey}:id`;
  let cur: Registration | undefined;
  let loaded: Promise<void> | undefined;
  let registering: Promise<void> | undefined;
  let reissuing: Promise<void> | undefined;
  let applying: Promise<void> | undefined;

  const save = () => storage.set(key, JSON.stringify(cur));
  const load = () =>
    (loaded ??= Promise.resolve(
      after(storage.get(key), (v) => {
        if (v) cur = JSON.parse(v) as Registration;
        if (!cur) {
          const d = opts.device ?? {};
          const [lang, region] = locale();
          const [model, os] = platform();
          const deviceId = d.deviceId ?? randomId();
          cur = {
            deviceId,
            userId: opts.userId ?? deviceId,
            userEmail: opts.userEmail,
            deviceModel: d.deviceModel ?? model,
            os: d.os ?? os,
            country: (d.country ?? region ?? "").toUpperCase(),
            language: (d.language ?? lang ?? "en").toLowerCase(),
          };
          return save();
        }
        // The app now names another user than the stored one: change it.
        if (opts.userId && opts.userId !== cur.userId && cur.pending?.userId !== opts.userId) {
          cur.pending = { ...cur.pending, userId: opts.userId, userEmail: opts.userEmail };
          return save();
        }
      }),
    ));

  async function register(): Promise<void> {
    const r = cur!;
    const res = await send<{ id: number; token: string }>(cfg, "/api/consumer", {
      body: {
        app_key: opts.appKey, device_id: r.deviceId, device_model: r.deviceModel, user_id: r.userId,
        os: r.os, country: r.country, language: r.language, user_email: r.userEmail,
      },
    });
    cur = { ...r, consumerId: res.data.id, token: res.data.token };
    await save();
  }

  async function reissue(failed: string): Promise<void> {
    if (cur!.token !== failed) return; // another request already has a fresh one
    await (reissuing ??= (async () => {
      try {
        const res = await send<{ token: string }>(cfg, "/api/consumer/token", {
          // GET carries no body in browsers: the query string (DECISIONS 3); device_id for strict mode.
          query: { app_key: opts.appKey, consumer_id: cur!.consumerId, device_id: cur!.deviceId },
        });
        cur!.token = res.data.token;
        await save();
      } catch (e) {
        // The consumer is gone (deleted) or unknown here: register again.
        if ((e instanceof PlatformError && e.status === 404) || e instanceof ValidationError) await register();
        else throw e;
      }
    })().finally(() => (reissuing = undefined)));
  }

  async function authed<T>(path: string, o: RequestOptions): Promise<HttpResponse<T>> {
    const token = cur!.token!;
    try {
      return await send<T>(cfg, path, { ...o, headers: { ...o.headers, authorization: `Bearer ${token}` } });
    } catch (e) {
      if (!(e instanceof PlatformError && e.status === 401)) throw e;
      await reissue(token);
      return send<T>(cfg, path, { ...o, headers: { ...o.headers, authorization: `Bearer ${cur!.token}` } });
    }
  }

  async function applyPending(): Promise<void> {
    await (applying ??= (async () => {
      const p = cur!.pending!;
      try {
        await authed(`/api/consumer/${cur!.consumerId}`, { method: "PATCH", body: userBody(p) });
      } catch (e) {
        if (e instanceof ValidationError) {
          delete cur!.pending; // never acceptable: drop it rather than block every request
          await save();
        }
        throw e;
      }
      Object.assign(cur!, defined(p));
      // A change made meanwhile (a new pending object) stays pending.
      if (cur!.pending === p) delete cur!.pending;
      await save();
    })().finally(() => (applying = undefined)));
  }

  async function ready(): Promise<Identity> {
    await load();
    if (!cur!.token) await (registering ??= register().finally(() => (registering = undefined)));
    while (cur!.pending) await applyPending();
    return cur as Identity;
  }

  return {
    appKey: opts.appKey,
    baseUrl: opts.baseUrl,
    storage,
    fetch: opts.fetch,
    timeoutMs: opts.timeoutMs,
    ready,
    get identity() {
      return cur?.token ? (cur as Identity) : undefined;
    },
    async request<T>(path: string, o: RequestOptions = {}) {
      await ready();
      return authed<T>(path, o);
    },
    async renewToken(failed) {
      await ready();
      await reissue(failed);
      return cur as Identity;
    },
    async setUser(u) {
      await load();
      if (!cur!.token) {
        // Not registered yet: register as this user directly.
        Object.assign(cur!, defined(u));
        await save();
        return;
      }
      cur!.pending = { ...cur!.pending, ...u };
      await save();
      await ready();
    },
    async reset() {
      await load();
      cur = undefined;
      loaded = undefined;
      await storage.remove(key);
    },
  };
}
