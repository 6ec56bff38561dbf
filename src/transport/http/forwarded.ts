// X-Forwarded-* headers are believed only from the configured proxies, and
// then only their rightmost value: the one the proxy that connected to us
// wrote (values to its left came with the request, from anyone).
import { isIPv4 } from "node:net";

export class ProxyTrust {
  private readonly addresses: ReadonlySet<string>;

  constructor(addresses: readonly string[]) {
    this.addresses = new Set(addresses.map(normalise));
  }

  /** Whether the peer address is a trusted proxy (IPv4 also in its ::ffff: form). */
  trusts(address: string | undefined): boolean {
    return this.addresses.size > 0 && address !== undefined && this.addresses.has(normalise(address));
  }
}

function normalise(address: string): string {
  const a = address.toLowerCase();
  return a.startsWith("::ffff:") && isIPv4(a.slice(7)) ? a.slice(7) : a;
}

/** The rightmost comma-separated value of a forwarded header (the trusted proxy's), trimmed; undefined when empty. */
export function forwardedValue(header: string | string[] | undefined): string | undefined {
  const h = Array.isArray(header) ? header[header.length - 1] : header;
  if (!h) return undefined;
  const v = h.slice(h.lastIndexOf(",") + 1).trim();
  return v || undefined;
}

const HOST_RE = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

/** A host[:port] fit for a URL (what a proxy forwards may be anything). */
export function isHost(value: string): boolean {
  return value.length <= 255 && HOST_RE.test(value);
}
