// Shared set-up of the SDK tests: an SDK client against a real test server
// (trusting its self-signed certificate), and counts read from its database.
import { Agent, fetch as undiciFetch } from "undici";
import { createClient, memoryStorage, type ClientOptions, type FetchLike, type PulsebaseClient } from "../../packages/client/src/index.js";
import type { TestServer } from "../helpers/server.js";

const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });

/** fetch that accepts the test server's self-signed certificate. */
export const insecureFetch: FetchLike = (url, init) =>
  undiciFetch(url, { ...init, dispatcher } as Parameters<typeof undiciFetch>[1]) as unknown as ReturnType<FetchLike>;

export function sdkClient(s: TestServer, appKey: string, o: Partial<ClientOptions> = {}): PulsebaseClient {
  return createClient({
    baseUrl: s.httpsUrl,
    appKey,
    fetch: insecureFetch,
    storage: memoryStorage(),
    device: { deviceModel: "test", os: "node", country: "DE", language: "de" },
    ...o,
  });
}

/** Occurrences of one event name, from the raw occurrence rows and from the aggregate. */
export async function eventCounts(s: TestServer, appId: bigint, name: string): Promise<{ rows: number; occurrences: number }> {
  const r = await s.db.sql.query<{ rows: string; occ: string | null }>(
    `SELECT (SELECT count(*) FROM analytics_event_occurrences o WHERE o.event_id = e.id) AS rows, e.occurrences AS occ
       FROM analytics_events e WHERE e.app_id = $1 AND e.name = $2`,
    [Number(appId), name],
  );
  return { rows: Number(r.rows[0]?.rows ?? 0), occurrences: Number(r.rows[0]?.occ ?? 0) };
}

export async function waitFor<T>(fn: () => Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}
