// Which addresses a function's fetch may connect to (egress-address.ts), and
// the allowlist's matching (fetch-host.ts): every spelling of a private or
// metadata address is caught, public ones pass.
import { describe, expect, it } from "vitest";
import { refusedAddress } from "../../../src/infra/sandbox/egress-address.js";
import { hostAllowed } from "../../../src/infra/sandbox/fetch-host.js";

describe("refusedAddress", () => {
  it("lets public addresses through", () => {
    for (const ip of ["93.184.216.34", "8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "2a00:1450:4001::200e"]) {
      expect(refusedAddress(ip), ip).toBeUndefined();
    }
  });

  it("calls private, CGNAT and unique-local addresses private; loopback and link-local apart (never open)", () => {
    for (const ip of ["10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "100.64.0.1", "100.127.255.254", "fc00::1", "fd12:3456::1"]) {
      expect(refusedAddress(ip), ip).toBe("private");
    }
    for (const ip of ["127.0.0.1", "127.255.0.9", "::1", "[::1]"]) expect(refusedAddress(ip), ip).toBe("loopback");
    for (const ip of ["169.254.1.1", "fe80::1"]) expect(refusedAddress(ip), ip).toBe("link-local");
  });

  it("sees private IPv4 addresses inside IPv6 (mapped, compatible, NAT64, 6to4)", () => {
    for (const ip of ["::ffff:10.0.0.1", "64:ff9b::a00:1", "2002:c0a8:101::1", "0:0:0:0:0:ffff:c0a8:0101"]) {
      expect(refusedAddress(ip), ip).toBe("private");
    }
    for (const ip of ["::ffff:127.0.0.1", "::ffff:7f00:1", "::127.0.0.1"]) expect(refusedAddress(ip), ip).toBe("loopback");
    expect(refusedAddress("::ffff:8.8.8.8")).toBeUndefined();
  });

  it("calls cloud metadata metadata, in any spelling", () => {
    for (const ip of ["169.254.169.254", "::ffff:169.254.169.254", "::ffff:a9fe:a9fe", "fd00:ec2::254", "fd00:ec2:0:0:0:0:0:254", "169.254.170.2", "100.100.100.200"]) {
      expect(refusedAddress(ip), ip).toBe("metadata");
    }
  });

  it("calls unspecified, multicast, broadcast, reserved and documentation addresses reserved, and garbage too", () => {
    for (const ip of ["0.0.0.0", "0.1.2.3", "224.0.0.1", "239.255.255.250", "255.255.255.255", "240.0.0.1", "192.0.2.1", "::", "ff02::1", "2001:db8::1", "not an ip", "1.2.3"]) {
      expect(refusedAddress(ip), ip).toBe("reserved");
    }
  });
});

describe("hostAllowed", () => {
  it("allows any host with an empty list; exact names and *. subdomains otherwise", () => {
    expect(hostAllowed("anything.example", [])).toBe(true);
    const list = ["api.example.com", "*.mail.example.org"];
    expect(hostAllowed("api.example.com", list)).toBe(true);
    expect(hostAllowed("x.api.example.com", list)).toBe(false);
    expect(hostAllowed("eu.mail.example.org", list)).toBe(true);
    expect(hostAllowed("a.b.mail.example.org", list)).toBe(true);
    expect(hostAllowed("mail.example.org", list)).toBe(false);
    expect(hostAllowed("evilmail.example.org", list)).toBe(false);
    expect(hostAllowed("api.example.com.evil.net", list)).toBe(false);
  });
});
