// Issue #28, point 4, more cases (red team): this machine's own
// non-loopback addresses (an fd00::/8 or 10/8 address of one of its
// interfaces) were "private", so an application allowed private addresses
// reached every service of this machine bound to all interfaces (another
// worker's admin or metrics listener, the database, NATS) through them;
// only the server's own listeners' ports were refused there. They are this
// machine, refused like loopback. A local-use NAT64 address
// (64:ff9b:1::/48, RFC 8215) carries the site's own IPv4 addresses: private.
// Checks only: no connection is made.
import { networkInterfaces } from "node:os";
import { describe, expect, it } from "vitest";
import { refusedAddress } from "../../../src/infra/sandbox/egress-address.js";
import { egressRefusal } from "../../../src/infra/sandbox/fetch-host.js";

const open = { allowHosts: [], allowPrivate: true };
/** This machine's interface addresses that are neither loopback nor link-local. */
const own = Object.values(networkInterfaces()).flatMap((l) => l ?? []).map((a) => a.address.split("%")[0]!)
  .filter((a) => !a.startsWith("127.") && a !== "::1" && !a.toLowerCase().startsWith("fe80"));

describe("this machine's own addresses", () => {
  it.skipIf(own.length === 0)("are refused at any port, with private addresses allowed", () => {
    for (const ip of own) {
      for (const port of [80, 4222, 5432, 9090]) {
        expect(egressRefusal("svc.test", ip, port, open), `${ip}:${port}`).toMatch(/loopback|not a routable/);
        expect(egressRefusal(ip, ip, port, open), `${ip}:${port}`).toMatch(/loopback|not a routable/);
      }
    }
  });

  it("are the same as loopback for the test switch (opened with it, never the server's own listeners)", () => {
    for (const ip of own) expect(refusedAddress(ip), ip).toMatch(/^(loopback|reserved)$/);
    // an address of no interface here stays private
    expect(refusedAddress("10.123.45.67")).toBe("private");
    expect(refusedAddress("fd12:3456::1")).toBe("private");
  });

  it("local-use NAT64 addresses are private", () => {
    expect(refusedAddress("64:ff9b:1::a00:1")).toBe("private");
    expect(egressRefusal("64:ff9b:1::a00:1", "64:ff9b:1::a00:1", 80, { allowHosts: [], allowPrivate: false })).toMatch(/private/);
  });
});
