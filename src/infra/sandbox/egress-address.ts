// Which addresses a function's fetch may connect to (docs/functions.md,
// "Calling other services: fetch"). Checked on the address each connection
// actually uses (fetch-host.ts resolves the name, checks every address, and
// hands only those to the socket), so neither a DNS answer that changes
// between check and connect nor a redirect reaches a refused address.
import { BlockList, isIPv4, isIPv6 } from "node:net";
import { networkInterfaces } from "node:os";

/**
 * Why an address is refused: "private" ranges open with the policy's
 * allowPrivate; "loopback" (this machine) only with the operator's test switch
 * as well (PULSEBASE_FUNCTION_EGRESS_ALLOW_LOOPBACK); the others never.
 */
export type RefusedKind = "private" | "loopback" | "link-local" | "metadata" | "reserved";

// Not routable on the public internet: refused unless the application's
// policy allows private ranges.
const PRIVATE_V4: Array<[string, number]> = [
  ["10.0.0.0", 8],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["192.0.0.0", 24], // IETF protocol assignments
  ["198.18.0.0", 15], // benchmarking
];
const PRIVATE_V6: Array<[string, number]> = [
  ["fc00::", 7], // unique local
  ["fec0::", 10], // site-local (deprecated)
  ["64:ff9b:1::", 48], // local-use NAT64 (RFC 8215): the site's own IPv4 addresses behind a translator
];
// This machine: its admin listener (/metrics on every tenant, the operator
// API) and every other local service. Never with allowPrivate (issue #28).
// The machine's other interface addresses (a private or public address of
// its own) count as loopback too (localAddresses, below): a service bound to
// all interfaces answers there.
const LOOPBACK_V4: Array<[string, number]> = [["127.0.0.0", 8]];
const LOOPBACK_V6: Array<[string, number]> = [["::1", 128]];
// The link's neighbours and its auto-configuration services: never.
const LINK_LOCAL_V4: Array<[string, number]> = [["169.254.0.0", 16]];
const LINK_LOCAL_V6: Array<[string, number]> = [["fe80::", 10]];
// Never a destination, whatever the policy.
const RESERVED_V4: Array<[string, number]> = [
  ["0.0.0.0", 8], // "this network", unspecified
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
  ["192.0.2.0", 24], // documentation
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
];
const RESERVED_V6: Array<[string, number]> = [
  ["::", 128], // unspecified
  ["ff00::", 8], // multicast
  ["100::", 64], // discard
  ["2001:db8::", 32], // documentation
];
// Cloud instance metadata (credentials of the machine): never, even with allowPrivate.
const METADATA = new Set(["169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254"]);
export const METADATA_HOSTS = new Set(["metadata.google.internal", "metadata.goog", "metadata"]);

function list(v4: Array<[string, number]>, v6: Array<[string, number]>): BlockList {
  const b = new BlockList();
  for (const [a, p] of v4) b.addSubnet(a, p, "ipv4");
  for (const [a, p] of v6) b.addSubnet(a, p, "ipv6");
  return b;
}
const privateList = list(PRIVATE_V4, PRIVATE_V6);
const reservedList = list(RESERVED_V4, RESERVED_V6);
const loopbackList = list(LOOPBACK_V4, LOOPBACK_V6);
const linkLocalList = list(LINK_LOCAL_V4, LINK_LOCAL_V6);

/** The IPv4 address an IPv6 address carries (mapped ::ffff:a.b.c.d, compatible ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16), else undefined. */
function embeddedV4(ip: string): string | undefined {
  const words = expandV6(ip);
  if (!words) return undefined;
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  const zero = (from: number, to: number) => words.slice(from, to).every((w) => w === 0);
  if (zero(0, 5) && words[5] === 0xffff) return v4(words[6]!, words[7]!);
  if (zero(0, 6) && (words[6]! !== 0 || words[7]! > 1)) return v4(words[6]!, words[7]!);
  if (words[0] === 0x64 && words[1] === 0xff9b && zero(2, 6)) return v4(words[6]!, words[7]!);
  if (words[0] === 0x2002) return v4(words[1]!, words[2]!);
  return undefined;
}

/** The eight 16-bit words of an IPv6 address (a trailing dotted IPv4 part included). */
function expandV6(ip: string): number[] | undefined {
  let s = ip.toLowerCase();
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const p = dotted[1]!.split(".").map(Number);
    s = s.slice(0, dotted.index) + ((p[0]! << 8) | p[1]!).toString(16) + ":" + ((p[2]! << 8) | p[3]!).toString(16);
  }
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const part = (h: string) => (h === "" ? [] : h.split(":").map((x) => parseInt(x, 16)));
  const head = part(halves[0]!);
  const tail = halves.length === 2 ? part(halves[1]!) : [];
  const fill = 8 - head.length - tail.length;
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return undefined;
  const words = [...head, ...Array<number>(fill).fill(0), ...tail];
  return words.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffff) ? words : undefined;
}

/** Undefined when a fetch may connect to `ip` (a literal IPv4 or IPv6 address), else what kind of address refuses it. */
export function refusedAddress(ip: string): RefusedKind | undefined {
  const bare = ip.startsWith("[") && ip.endsWith("]") ? ip.slice(1, -1) : ip;
  if (isIPv4(bare)) {
    if (METADATA.has(bare)) return "metadata";
    if (reservedList.check(bare, "ipv4")) return "reserved";
    if (loopbackList.check(bare, "ipv4")) return "loopback";
    if (linkLocalList.check(bare, "ipv4")) return "link-local";
    // this machine by another of its addresses: its other services answer there too
    if (localAddresses().has(bare)) return "loopback";
    if (privateList.check(bare, "ipv4")) return "private";
    return undefined;
  }
  if (!isIPv6(bare)) return "reserved";
  const words = expandV6(bare);
  if (!words) return "reserved";
  const canonical = words.map((w) => w.toString(16)).join(":");
  if (METADATA.has(compressV6(words))) return "metadata";
  const v4 = embeddedV4(bare);
  if (v4 !== undefined) return refusedAddress(v4);
  if (reservedList.check(canonical, "ipv6")) return "reserved";
  if (loopbackList.check(canonical, "ipv6")) return "loopback";
  if (linkLocalList.check(canonical, "ipv6")) return "link-local";
  if (localAddresses().has(compressV6(words))) return "loopback";
  if (privateList.check(canonical, "ipv6")) return "private";
  return undefined;
}

/** RFC 5952 text of the words (longest run of zero words as "::"). */
function compressV6(words: number[]): string {
  let best = -1, bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen && j - i > 1) { best = i; bestLen = j - i; }
    i = j;
  }
  const hex = words.map((w) => w.toString(16));
  if (best < 0) return hex.join(":");
  return `${hex.slice(0, best).join(":")}::${hex.slice(best + bestLen).join(":")}`;
}

/** One form per address: an IPv4 address carried in IPv6 as the IPv4 text, IPv6 compressed lower case; undefined when not an IP. */
export function canonicalIp(ip: string): string | undefined {
  const bare = ip.startsWith("[") && ip.endsWith("]") ? ip.slice(1, -1) : ip;
  if (isIPv4(bare)) return bare;
  if (!isIPv6(bare)) return undefined;
  const words = expandV6(bare);
  if (!words) return undefined;
  return embeddedV4(bare) ?? compressV6(words);
}

// The server's own listeners in this process (build.ts adds them once they
// listen). A function's fetch never reaches them, whatever the policy or the
// test switch says, also through a non-loopback interface address.
const own = new Map<number, { address: string; port: number }>();
let ownSeq = 0;

/** Marks listeners as the server's own (address as bound, "0.0.0.0" or "::" for all); returns their removal. */
export function addOwnListeners(listeners: ReadonlyArray<{ address: string; port: number }>): () => void {
  const ids: number[] = [];
  for (const l of listeners) {
    if (!(l.port > 0)) continue;
    const id = ++ownSeq;
    own.set(id, { address: canonicalIp(l.address) ?? l.address, port: l.port });
    ids.push(id);
  }
  return () => {
    for (const id of ids) own.delete(id);
  };
}

let localCache: { at: number; addrs: Set<string> } | undefined;
/** This machine's interface addresses (read again every few seconds: interfaces come and go). */
function localAddresses(): Set<string> {
  const now = Date.now();
  if (localCache && now - localCache.at < 5_000) return localCache.addrs;
  const addrs = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      const c = canonicalIp(a.address);
      if (c) addrs.add(c);
    }
  }
  localCache = { at: now, addrs };
  return addrs;
}

/** Whether a connection to `ip`:`port` would reach one of this server's own listeners. */
export function isOwnListener(ip: string, port: number): boolean {
  if (own.size === 0) return false;
  const c = canonicalIp(ip);
  if (c === undefined) return false;
  // On the safe side: any address of this machine (loopback included) at a
  // listener's port, as a wildcard bind answers on all of them.
  let local: boolean | undefined;
  for (const l of own.values()) {
    if (l.port !== port) continue;
    if (l.address === c) return true;
    local ??= refusedAddress(c) === "loopback" || localAddresses().has(c);
    if (local) return true;
  }
  return false;
}
