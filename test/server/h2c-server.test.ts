// HTTP/1.1 and cleartext HTTP/2 (prior knowledge) on one port, behind
// Fastify as the admin listener uses it: both protocols reach the same
// routes, a preface split across packets still counts, and close() drains
// both (idle connections closed, in-flight requests and Watch streams end).
import http2 from "node:http2";
import { connect, type AddressInfo } from "node:net";
import Fastify, { type FastifyInstance } from "fastify";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { afterEach, expect, it } from "vitest";
import { fetch, Agent } from "undici";
import {
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as Status,
  type HealthCheckResponse,
} from "../../gen/health/v1/health_pb.js";
import { H2cServer, h2cServerFactory } from "../../src/server/h2c-server.js";
import { registerGrpcInfra } from "../../src/transport/connect-node/grpc-infra.js";
import { until } from "../helpers/until.js";

const open: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) await o.close().catch(() => undefined);
});

/** /slow's handlers: each waits for the test's release() (in flight for as long as the test needs). */
const slow = {
  entered: 0,
  gate: Promise.withResolvers<void>(),
  release() {
    this.gate.resolve();
  },
};

async function app(): Promise<{ app: FastifyInstance; port: number }> {
  const a = Fastify({ serverFactory: h2cServerFactory, forceCloseConnections: "idle" }) as unknown as FastifyInstance;
  a.get("/who", (req, reply) => reply.send({ version: req.raw.httpVersion, ip: req.ip }));
  a.get("/slow", async (_req, reply) => {
    slow.entered++;
    await slow.gate.promise;
    return reply.send({ done: true });
  });
  await registerGrpcInfra(a, { services: [], ready: async () => {}, readMaxBytes: 1 << 20 });
  await a.listen({ host: "127.0.0.1", port: 0 });
  open.push(a);
  return { app: a, port: (a.server.address() as AddressInfo).port };
}

function h2get(session: http2.ClientHttp2Session, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ":path": path });
    let body = "";
    let status = 0;
    req.on("response", (h) => (status = Number(h[":status"])));
    req.on("data", (d) => (body += d));
    req.on("end", () => resolve({ status, body }));
    req.on("error", reject);
  });
}

it("serves HTTP/1.1 and h2c on one port, with the peer address on both", async () => {
  const { port } = await app();
  const agent = new Agent();
  open.push(agent);
  const h1 = await fetch(`http://127.0.0.1:${port}/who`, { dispatcher: agent });
  expect(await h1.json()).toEqual({ version: "1.1", ip: "127.0.0.1" });
  const session = http2.connect(`http://127.0.0.1:${port}`);
  try {
    const r = await h2get(session, "/who");
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toEqual({ version: "2.0", ip: "127.0.0.1" });
  } finally {
    session.close();
  }
});

it("recognises the HTTP/2 preface when it arrives a few bytes at a time", async () => {
  const { port } = await app();
  const session = http2.connect(`http://127.0.0.1:${port}`, {
    createConnection: () => {
      const socket = connect(port, "127.0.0.1");
      socket.setNoDelay(true);
      // Split every write in 5-byte pieces (the preface is 24 bytes).
      const write = socket.write.bind(socket) as (chunk: Buffer, cb?: (err?: Error | null) => void) => boolean;
      socket.write = ((chunk: Buffer, ...rest: unknown[]) => {
        const cb = rest.find((x) => typeof x === "function") as ((err?: Error | null) => void) | undefined;
        const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
        for (let i = 0; i < buf.length; i += 5) write(buf.subarray(i, i + 5), i + 5 >= buf.length ? cb : undefined);
        return true;
      }) as typeof socket.write;
      return socket;
    },
  });
  try {
    expect((await h2get(session, "/who")).status).toBe(200);
  } finally {
    session.close();
  }
});

it("lets Fastify answer a malformed HTTP/1.1 request", async () => {
  const { port } = await app();
  const socket = connect(port, "127.0.0.1");
  socket.write("GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n");
  let answer = "";
  socket.on("data", (d) => (answer += d));
  await new Promise((r) => socket.once("close", r));
  expect(answer).toMatch(/^HTTP\/1.1 400/);
  // Fastify's client error handler, not Node's bare default.
  expect(answer).toContain('"statusCode":400');
});

it("survives HTTP/2 clients that send garbage or reset the connection", async () => {
  const { port } = await app();
  for (const tail of [Buffer.from("garbage that is not a SETTINGS frame"), Buffer.alloc(0)]) {
    const socket = connect(port, "127.0.0.1");
    await new Promise((r) => socket.once("connect", r));
    socket.write(Buffer.concat([Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), tail]));
    // the server has taken the preface (its SETTINGS frame arrives) before the reset
    await new Promise((r) => socket.once("data", r));
    socket.resetAndDestroy();
  }
  const session = http2.connect(`http://127.0.0.1:${port}`);
  try {
    expect((await h2get(session, "/who")).status).toBe(200);
  } finally {
    session.close();
  }
});

it("drops a connection that never says anything", async () => {
  const server = new H2cServer(() => undefined, { firstBytesTimeout: 200 });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  open.push({ close: () => new Promise((r) => server.close(r)) });
  const socket = connect((server.address() as AddressInfo).port, "127.0.0.1");
  let got = 0;
  socket.on("data", (d: Buffer) => (got += d.length));
  // closed by the server (nothing else would close it: a hang is this test's timeout), without an answer
  await new Promise((resolve) => socket.once("close", resolve));
  expect(got).toBe(0);
});

it("close() lets in-flight requests finish on both protocols and closes idle connections", async () => {
  const { app: a, port } = await app();
  const agent = new Agent();
  open.push(agent);
  // An idle keep-alive HTTP/1.1 connection and an idle HTTP/2 session.
  await (await fetch(`http://127.0.0.1:${port}/who`, { dispatcher: agent })).text();
  const idle = http2.connect(`http://127.0.0.1:${port}`);
  await h2get(idle, "/who");
  const idleClosed = new Promise<void>((r) => idle.once("close", () => r()));

  slow.entered = 0;
  slow.gate = Promise.withResolvers<void>();
  const session = http2.connect(`http://127.0.0.1:${port}`);
  const h2slow = h2get(session, "/slow");
  const h1slow = fetch(`http://127.0.0.1:${port}/slow`, { dispatcher: agent }).then(async (r) => ({ status: r.status, body: await r.text() }));
  await until(async () => (slow.entered === 2 ? true : undefined), 10_000, 5);
  let closed = false;
  const closing = a.close().then(() => (closed = true));
  // The idle connections go while both requests are still in flight (a
  // close that waited for them, or for the keep-alive timeout, would hang:
  // this test's timeout).
  await idleClosed;
  expect(closed).toBe(false);
  slow.release();
  expect(await h2slow).toEqual({ status: 200, body: JSON.stringify({ done: true }) });
  expect(await h1slow).toEqual({ status: 200, body: JSON.stringify({ done: true }) });
  await closing;
  session.close();
});

it("ends Watch streams with NOT_SERVING when the server closes", async () => {
  const { app: a, port } = await app();
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  try {
    const call = client.makeServerStreamRequest(
      "/grpc.health.v1.Health/Watch",
      (m: ReturnType<typeof create<typeof HealthCheckRequestSchema>>) => Buffer.from(toBinary(HealthCheckRequestSchema, m)),
      (b: Buffer) => fromBinary(HealthCheckResponseSchema, b),
      create(HealthCheckRequestSchema, { service: "" }),
    );
    const seen: Status[] = [];
    const ended = new Promise<grpc.StatusObject>((resolve) => call.on("status", resolve));
    call.on("error", () => undefined);
    const first = new Promise<void>((resolve) =>
      call.on("data", (r: HealthCheckResponse) => {
        seen.push(r.status);
        resolve();
      }),
    );
    await first;
    // The stream would stay open for ever: close() ends it (a hang is this test's timeout).
    await a.close();
    expect((await ended).code).toBe(grpc.status.OK);
    expect(seen).toEqual([Status.SERVING, Status.NOT_SERVING]);
  } finally {
    client.close();
  }
});
