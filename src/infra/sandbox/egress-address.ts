// Which addresses a function's fetch may connect to (docs/functions.md,
// "Calling other services: fetch"). Checked on the address each connection
// actually uses (fetch-host.ts resolves the name, checks every address, and
// hands only those to the socket), so neither a DNS answer that changes
// between check and connect nor a redirect reaches a refused address.
import { BlockList, isIPv4, isIPv6 } from "node:net";

/** Why an address is refused: "private" ranges open with the policy's allowPrivate, the others never. */
export type RefusedKind = "private" | "metadata" | "reserved";

// Not routable on the public internet, or reaching this machine or its
// neighbours: refused unless the application's policy allows private ranges.
const PRIVATE_V4: Array<[string, number]> = [
  ["127.0.0.0", 8], // loopback
  ["10.0.0.0", 8],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
  ["169.254.0.0", 16], // link-local
  ["100.64.0.0", 10], // carrier-grade NAT
  ["192.0.0.0", 24], // IETF protocol assignments
  ["198.18.0.0", 15], // benchmarking
];
const PRIVATE_V6: Array<[string, number]> = [
  ["::1", 128], // loopback
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated)
];
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
