// Shared test setup: an application with consumers and sessions, and an
// in-memory Connect client whose caller is chosen per call (x-test-consumer).
import { createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { kConsumer, type ConsumerPrincipal } from "../../../src/kernel/principal.js";
import type { Sql } from "../../../src/infra/storage/sql.js";

export interface TestConsumer extends ConsumerPrincipal {
  sessions: number[];
}

let seq = 0;

/** Creates a team, an app and one consumer per user id (each with 2 sessions). */
export async function seedApp(sql: Sql, userIds: string[]): Promise<{ appId: number; consumers: TestConsumer[] }> {
  const tag = `${process.pid}-${Date.now()}-${seq++}`;
  const team = await sql.query<{ id: number }>("INSERT INTO teams (name) VALUES ($1) RETURNING id", [`team ${tag}`]);
  const app = await sql.query<{ id: number }>(
    "INSERT INTO apps (team_id, name, app_key, plan) VALUES ($1, $2, $3, '{}'::jsonb) RETURNING id",
    [team.rows[0]!.id, `app ${tag}`, `key-${tag}`],
  );
  const appId = Number(app.rows[0]!.id);
  const consumers: TestConsumer[] = [];
  for (const [i, userId] of userIds.entries()) {
    const deviceId = `device-${i}`;
    const c = await sql.query<{ id: number }>(
      `INSERT INTO consumers (app_id, user_id, device_id, device_model, os, country, language)
       VALUES ($1, $2, $3, 'Pixel', 'android', 'NL', 'nl') RETURNING id`,
      [appId, userId, deviceId],
    );
    const consumerId = Number(c.rows[0]!.id);
    const s = await sql.query<{ id: number }>(
      "INSERT INTO sessions (consumer_id, app_id, started_at) SELECT $1, $2, now() FROM generate_series(1, 2) RETURNING id",
      [consumerId, appId],
    );
    consumers.push({ consumerId, appId, appKey: `key-${tag}`, userId, deviceId, sessions: s.rows.map((r) => Number(r.id)) });
  }
  return { appId, consumers };
}

/** A client whose calls run as a given consumer (passed in a test-only header). */
export function clientFor<S extends DescService>(service: S, impl: ServiceImpl<S>) {
  const transport = createRouterTransport((r) => r.service(service, impl), {
    router: {
      interceptors: [
        (next) => async (req) => {
          const who = req.header.get("x-test-consumer");
          req.contextValues.set(kConsumer, who ? (JSON.parse(who) as ConsumerPrincipal) : undefined);
          return next(req);
        },
      ],
    },
  });
  const client: Client<S> = createClient(service, transport);
  return {
    /** Calls as consumer c, with extra request headers (Idempotency-Key). */
    as(c: ConsumerPrincipal | undefined, headers: Record<string, string> = {}): Client<S> {
      return new Proxy(client, {
        get(target, prop) {
          const fn = (target as Record<string | symbol, unknown>)[prop];
          if (typeof fn !== "function") return fn;
          return (req: unknown) =>
            (fn as (r: unknown, o: unknown) => unknown).call(target, req, {
              headers: { ...headers, ...(c ? { "x-test-consumer": JSON.stringify(c) } : {}) },
            });
        },
      });
    },
  };
}

/** Polls until fn returns a truthy value (or fails after timeoutMs). */
export async function waitFor<T>(fn: () => Promise<T>, timeoutMs = 15_000, label = "condition"): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${label}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function countOf(sql: Sql, query: string, params: unknown[] = []): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(query, params);
  return Number(rows[0]?.n ?? 0);
}
