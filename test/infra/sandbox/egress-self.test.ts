// Issue #28, point 4: a function's fetch never reaches the platform itself.
// Loopback, link-local and the server's own listeners stay closed whatever
// the application's policy says (allow_private, an allowlist naming
// 127.0.0.1, localhost or "*.0.0.1"); only the operator's test switch
// (PULSEBASE_FUNCTION_EGRESS_ALLOW_LOOPBACK) opens loopback, and never the
// server's own listener ports. Real loopback servers here record every
// request, so "refused" means nothing reached them. Private ranges (10/8 ...)
// are checked as decisions only: this machine may reach nothing but loopback.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { networkInterfaces } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSandbox } from "../../../src/infra/sandbox/sandbox.js";
import { createFetchHost, egressRefusal, hostAllowed, type EgressPolicy } from "../../../src/infra/sandbox/fetch-host.js";
import { addOwnListeners, refusedAddress } from "../../../src/infra/sandbox/egress-address.js";
import type { RunInput } from "../../../src/infra/sandbox/types.js";
import { normalizeHost } from "../../../src/capabilities/functions/egress-policy-store.js";

/** A loopback HTTP server that counts the requests it gets. */
async function recorder(): Promise<{ server: Server; port: number; hits: () => number }> {
  let hits = 0;
  const server = createServer((req, res) => {
    hits++;
    res.end("reached");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, port: (server.address() as AddressInfo).port, hits: () => hits };
}

// Every allowlist spelling that once opened loopback.
const HOSTILE_LIST = ["*.0.0.1", "127.0.0.1", "localhost", "*.localhost", "::1", "*.1", "*.0.1", "0.0.0.0", "::ffff:7f00:1"];
const policies = new Map<number, EgressPolicy>();
const PRIVATE = 1, LISTED = 2;
policies.set(PRIVATE, { allowHosts: [], allowPrivate: true });
policies.set(LISTED, { allowHosts: HOSTILE_LIST, allowPrivate: true });
const resolve = async (host: string) =>
  host === "localhost" || host.endsWith(".localhost") || host === "self.test" ? [{ address: "127.0.0.1", family: 4 }] : [{ address: "93.184.216.34", family: 4 }];

/** This machine's non-loopback interface addresses (e.g. fd00::2 on eth0). */
const localInterfaceAddresses = () => Object.values(networkInterfaces()).flatMap((l) => l ?? []).filter((a) => !a.internal).map((a) => a.address);

let target: Awaited<ReturnType<typeof recorder>>;
let own: Awaited<ReturnType<typeof recorder>>;
beforeAll(async () => {
  target = await recorder();
  own = await recorder();
});
afterAll(async () => {
  for (const s of [target, own]) {
    s.server.closeAllConnections();
    await new Promise((r) => s.server.close(r));
  }
});

let version = 1;
function runner(limits: Record<string, unknown>) {
  const host = createFetchHost({ policyOf: async (appId) => policies.get(appId)!, resolve, limits: { timeoutMs: 3_000, ...limits } });
  const sandbox = createSandbox({ capabilities: host.capabilities, limits: { syncSliceMs: 0 } });
  return {
    /** What each URL gave the function: "fetched <status>" or the error's code. */
    async each(appId: number, urls: string[], port: number): Promise<string[]> {
      const code = `export default async (req, ctx) => {
        const out = [];
        for (const u of ${JSON.stringify(urls)}) {
          try { const r = await fetch(u.replaceAll("PORT", ctx.env.PORT)); out.push("fetched " + r.status); }
          catch (e) { out.push(String(e.code ?? e.name)); }
        }
        return out;
      }`;
      const input: RunInput = { req: null, consumer: null, event: null, env: { PORT: String(port) }, trigger: "manual", requestId: "r" };
      const r = await sandbox.run({ versionId: version++, appId, code, memoryMb: 64, timeoutMs: 20_000 }, input);
      expect(r.outcome, r.error).toBe("ok");
      return JSON.parse(r.response!.body) as string[];
    },
    async close() {
      sandbox.close();
      await host.close();
    },
  };
}

const LOOPBACK_URLS = [
  "http://127.0.0.1:PORT/", "http://127.1:PORT/", "http://127.0.0.2:PORT/", "http://2130706433:PORT/", "http://[::1]:PORT/",
  "http://[::ffff:127.0.0.1]:PORT/", "http://[::ffff:7f00:1]:PORT/", "http://[0:0:0:0:0:ffff:127.0.0.1]:PORT/", "http://[64:ff9b::7f00:1]:PORT/",
  "http://localhost:PORT/", "http://app.localhost:PORT/", "http://self.test:PORT/", "http://0.0.0.0:PORT/",
];

describe("loopback stays closed with allow_private (default: no test switch)", () => {
  const r = runner({});
  afterAll(() => r.close());

  it("refuses every spelling of loopback to an application allowed private addresses", async () => {
    expect(await r.each(PRIVATE, LOOPBACK_URLS, target.port)).toEqual(LOOPBACK_URLS.map(() => "egress_refused"));
    expect(target.hits()).toBe(0);
  });

  it("refuses them also when the allowlist names 127.0.0.1, localhost, *.localhost, ::1 or *.0.0.1", async () => {
    expect(await r.each(LISTED, LOOPBACK_URLS, target.port)).toEqual(LOOPBACK_URLS.map(() => "egress_refused"));
    expect(target.hits()).toBe(0);
  });
});

describe("the operator's test switch (allowLoopback)", () => {
  const r = runner({ allowLoopback: true });
  let release: () => void;
  beforeAll(() => {
    // `own` plays the server's admin listener
    release = addOwnListeners([{ address: "127.0.0.1", port: own.port }]);
  });
  afterAll(async () => {
    release();
    await r.close();
  });

  it("opens loopback to an application allowed private addresses, but never the server's own listeners", async () => {
    expect(await r.each(PRIVATE, ["http://127.0.0.1:PORT/", "http://localhost:PORT/"], target.port)).toEqual(["fetched 200", "fetched 200"]);
    expect(target.hits()).toBe(2);
    const urls = ["http://127.0.0.1:PORT/metrics", "http://localhost:PORT/metrics", "http://self.test:PORT/", "http://[::ffff:127.0.0.1]:PORT/", "http://127.0.0.9:PORT/"];
    expect(await r.each(PRIVATE, urls, own.port)).toEqual(urls.map(() => "egress_refused"));
    expect(own.hits()).toBe(0);
  });

  it("a redirect from an allowed server to the server's own listener is refused", async () => {
    const redirector = createServer((req, res) => {
      res.statusCode = 302;
      res.setHeader("location", `http://127.0.0.1:${own.port}/metrics`);
      res.end();
    });
    await new Promise<void>((ok) => redirector.listen(0, "127.0.0.1", ok));
    try {
      expect(await r.each(PRIVATE, ["http://127.0.0.1:PORT/go"], (redirector.address() as AddressInfo).port)).toEqual(["egress_refused"]);
      expect(own.hits()).toBe(0);
    } finally {
      redirector.closeAllConnections();
      await new Promise((ok) => redirector.close(ok));
    }
  });

  it("does not open loopback to an application without allow_private", async () => {
    policies.set(9, { allowHosts: [], allowPrivate: false });
    expect(await r.each(9, ["http://127.0.0.1:PORT/"], target.port)).toEqual(["egress_refused"]);
  });
});

describe("the decision (no connection made)", () => {
  const open: EgressPolicy = { allowHosts: [], allowPrivate: true };

  it("calls loopback loopback and link-local link-local, in every spelling", () => {
    for (const ip of ["127.0.0.1", "127.9.9.9", "::1", "[::1]", "::ffff:127.0.0.1", "::ffff:7f00:1", "64:ff9b::7f00:1", "::127.0.0.1"]) {
      expect(refusedAddress(ip), ip).toBe("loopback");
    }
    for (const ip of ["169.254.1.1", "169.254.0.0", "169.254.255.255", "fe80::1", "fe80::fc:ff:fe00:1", "febf::1", "::ffff:169.254.1.1", "::ffff:a9fe:101"]) {
      expect(refusedAddress(ip), ip).toBe("link-local");
    }
  });

  it("with allow_private: private ranges open; loopback, link-local and metadata closed, test switch or not", () => {
    for (const ip of ["10.0.0.1", "10.255.1.2", "172.16.0.1", "192.168.1.1", "100.64.0.1", "fc00::1", "fd12::1", "::ffff:10.0.0.1"]) {
      expect(egressRefusal(ip, ip, 443, open), ip).toBeUndefined();
      expect(egressRefusal(ip, ip, 443, { ...open, allowPrivate: false }), ip).toMatch(/private/);
    }
    for (const ip of ["169.254.1.1", "fe80::1", "::ffff:169.254.1.1", "169.254.169.254"]) {
      expect(egressRefusal(ip, ip, 80, open), ip).toBeDefined();
      expect(egressRefusal(ip, ip, 80, open, { allowLoopback: true }), ip).toBeDefined();
    }
    expect(egressRefusal("127.0.0.1", "127.0.0.1", 80, open)).toMatch(/loopback/);
    expect(egressRefusal("::1", "::1", 80, open, { allowLoopback: true })).toBeUndefined();
  });

  it("refuses the server's own listener even on a non-loopback interface address, and with a wildcard bind every local address at its port", () => {
    const release = addOwnListeners([{ address: "10.9.8.7", port: 8443 }, { address: "::", port: 8444 }]);
    try {
      expect(egressRefusal("10.9.8.7", "10.9.8.7", 8443, open)).toMatch(/this server's own/);
      expect(egressRefusal("h.test", "::ffff:10.9.8.7", 8443, open)).toMatch(/this server's own/);
      expect(egressRefusal("10.9.8.7", "10.9.8.7", 8442, open)).toBeUndefined();
      // the wildcard listener answers on every address of this machine (and loopback, whatever the switch)
      for (const ip of localInterfaceAddresses()) expect(egressRefusal(ip, ip, 8444, open), ip).toMatch(/this server's own/);
      expect(egressRefusal("127.0.0.1", "127.0.0.1", 8444, open, { allowLoopback: true })).toMatch(/this server's own/);
      expect(egressRefusal("10.1.1.1", "10.1.1.1", 8444, open)).toBeUndefined();
    } finally {
      release();
    }
    expect(egressRefusal("10.9.8.7", "10.9.8.7", 8443, open)).toBeUndefined();
  });
});

describe("allowlist wildcards", () => {
  it("never match an IP literal", () => {
    expect(hostAllowed("127.0.0.1", ["*.0.0.1"])).toBe(false);
    expect(hostAllowed("10.0.0.1", ["*.0.1"])).toBe(false);
    expect(hostAllowed("10.0.0.1", ["*.1"])).toBe(false);
    expect(hostAllowed("::1", ["*.1"])).toBe(false);
    expect(hostAllowed("a.example.com", ["*.example.com"])).toBe(true);
  });

  it("ending in a number are refused when the operator sets the policy (they could only ever match an IP address)", () => {
    for (const e of ["*.0.0.1", "*.0.1", "*.1", "*.168.1.1", "1.2.3", "a.b.123"]) expect(normalizeHost(e), e).toBeUndefined();
    expect(normalizeHost("*.example.com")).toBe("*.example.com");
    expect(normalizeHost("127.0.0.1")).toBe("127.0.0.1");
  });
});
