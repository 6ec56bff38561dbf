// Each application's egress policy (docs/functions.md, "Calling other
// services: fetch"): where its functions' fetch may connect. One row per
// application in function_egress_policies, set by operators; no row is the
// default (any public host, private addresses refused). The sandbox's fetch
// (src/infra/sandbox/fetch-host.ts) reads it once per invocation through a
// short cache: a change applies everywhere within `cacheMs` (and at once in
// the process that made it, and in those the change bus reaches first).
import { isIP } from "node:net";
import { Violations } from "../../kernel/errors.js";
import { TtlCache } from "../../kernel/ttl-cache.js";
import type { Sql } from "../../infra/storage/sql.js";
import { DEFAULT_EGRESS_POLICY, type EgressPolicy } from "../../infra/sandbox/fetch-host.js";

export const MAX_ALLOWED_HOSTS = 100;
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

export interface StoredEgressPolicy extends EgressPolicy {
  /** Unset when no policy was ever set (the default). */
  updatedAt?: Date;
}

export interface EgressPolicyStore {
  get(appId: number): Promise<StoredEgressPolicy>;
  /** Validates (validation_failed with the bad entries) and replaces the policy. */
  set(appId: number, policy: EgressPolicy): Promise<StoredEgressPolicy>;
  /** What the sandbox asks on an invocation's first fetch (cached). */
  policyOf(appId: number): Promise<EgressPolicy>;
  /** Drops the cached policy (a change announced by another process). */
  invalidate(appId?: number): void;
}

/** One allowlist entry in its stored form (lower case, no trailing dot, IPv6 without brackets), or undefined when it is not a host. */
export function normalizeHost(entry: string): string | undefined {
  let h = entry.trim().toLowerCase();
  if (h.endsWith(".")) h = h.slice(0, -1);
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  // IPv6 in the WHATWG URL's canonical form, as fetch-host.ts compares it
  // ("2001:0DB8::0001" is stored as "2001:db8::1"); IPv4 is already canonical.
  // (a zone id, "fe80::1%eth0", is no host a URL can name)
  if (isIP(h) === 6) return h.includes("%") ? undefined : new URL(`http://[${h}]/`).hostname.slice(1, -1);
  if (isIP(h)) return h;
  const wildcard = h.startsWith("*.");
  const name = wildcard ? h.slice(2) : h;
  if (name.length === 0 || name.length > 253) return undefined;
  const labels = name.split(".");
  if (!labels.every((l) => LABEL.test(l))) return undefined;
  // "*.com"-like patterns would open a whole top-level domain
  if (wildcard && labels.length < 2) return undefined;
  // a name ending in a number is an IPv4 address to a URL ("*.0.0.1" only ever met 127.0.0.1, issue #28)
  if (/^\d+$/.test(labels[labels.length - 1]!)) return undefined;
  return h;
}

export function createEgressPolicyStore(sql: Sql, cacheMs = 1_000): EgressPolicyStore {
  const cache = new TtlCache<number, Promise<EgressPolicy>>(cacheMs, 10_000);

  async function get(appId: number): Promise<StoredEgressPolicy> {
    const r = await sql.query<{ allow_hosts: string[]; allow_private: boolean; updated_at: Date | string }>(
      "SELECT allow_hosts, allow_private, updated_at FROM function_egress_policies WHERE app_id = $1",
      [appId],
    );
    const row = r.rows[0];
    if (!row) return { ...DEFAULT_EGRESS_POLICY, allowHosts: [] };
    return { allowHosts: row.allow_hosts, allowPrivate: row.allow_private, updatedAt: new Date(row.updated_at) };
  }

  return {
    get,
    async set(appId, policy) {
      const v = new Violations();
      if (policy.allowHosts.length > MAX_ALLOWED_HOSTS) v.add("allow_hosts", `at most ${MAX_ALLOWED_HOSTS} hosts`);
      const hosts: string[] = [];
      for (const [i, h] of policy.allowHosts.entries()) {
        const n = normalizeHost(h);
        if (n === undefined) v.add(`allow_hosts[${i}]`, `${JSON.stringify(h)} is not a host name, an IP address or "*." and a host name (no scheme, port or path)`);
        else if (!hosts.includes(n)) hosts.push(n);
      }
      v.throwIfAny();
      const r = await sql.query<{ updated_at: Date | string }>(
        `INSERT INTO function_egress_policies (app_id, allow_hosts, allow_private, updated_at) VALUES ($1, $2, $3, now())
         ON CONFLICT (app_id) DO UPDATE SET allow_hosts = EXCLUDED.allow_hosts, allow_private = EXCLUDED.allow_private, updated_at = now()
         RETURNING updated_at`,
        [appId, hosts, policy.allowPrivate],
      );
      cache.delete(appId);
      return { allowHosts: hosts, allowPrivate: policy.allowPrivate, updatedAt: new Date(r.rows[0]!.updated_at) };
    },
    policyOf(appId) {
      let p = cache.get(appId);
      if (!p) {
        p = get(appId).then(({ allowHosts, allowPrivate }) => ({ allowHosts, allowPrivate }));
        cache.set(appId, p);
        // a failed read is not remembered
        p.catch(() => cache.delete(appId));
      }
      return p;
    },
    invalidate(appId) {
      if (appId === undefined) cache.clear();
      else cache.delete(appId);
    },
  };
}
