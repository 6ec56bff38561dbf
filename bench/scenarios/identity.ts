// Identity scenarios: consumer registration and session start over REST
// (HTTP/1.1 and HTTP/2) and session start over Connect binary (HTTP/2),
// compared with the bare Fastify baseline on the same listener kind.
import { create, toBinary } from "@bufbuild/protobuf";
import { StartSessionRequestSchema } from "../../gen/pulsebase/platform/v1/session_pb.js";
import { alternate, h1Load, h2, seqLoad, versusRest, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";

export async function identityScenarios(ctx: BenchContext): Promise<Row[]> {
  const { appKey, token } = await ctx.newConsumer("identity");
  const d = ctx.durationSec;
  const rows: Row[] = [];
  const reg = JSON.stringify({ app_key: appKey, device_id: "bench-device", device_model: "m", user_id: "bench", os: "ios", country: "US", language: "en" });
  rows.push({
    scenario: "POST /api/consumer", transport: "REST h1", baseline: "bare Fastify POST REST h1",
    result: await h1Load({ url: `${ctx.https}/api/consumer`, method: "POST", headers: { "content-type": "application/json" }, body: reg, durationSec: d }),
  });
  rows.push({
    scenario: "POST /api/session/start", transport: "REST h1", baseline: "bare Fastify POST REST h1",
    result: await h1Load({ url: `${ctx.https}/api/session/start`, method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: "{}", durationSec: d }),
  });
  // REST and Connect turn about (alternate): their ratio is the point.
  const [restH2, connect] = await alternate(
    (t) => h2({ url: ctx.https, path: "/api/session/start", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: Buffer.from("{}"), durationSec: t }),
    (t) => h2({
      url: ctx.https,
      path: "/pulsebase.platform.v1.SessionService/StartSession",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/proto", "connect-protocol-version": "1" },
      body: toBinary(StartSessionRequestSchema, create(StartSessionRequestSchema)),
      durationSec: t,
    }),
    d,
  );
  rows.push({ scenario: "POST /api/session/start", transport: "REST h2", baseline: "bare Fastify POST REST h2", result: restH2 });
  rows.push({ scenario: "SessionService/StartSession", transport: "Connect binary h2", baseline: "bare Fastify POST REST h2", result: connect, note: versusRest(connect, restH2, "REST h2") });
  rows.push({
    scenario: "SessionService/StartSession", transport: "Connect binary h1", baseline: "bare Fastify POST REST h1",
    result: await h1Load({
      url: `${ctx.https}/pulsebase.platform.v1.SessionService/StartSession`,
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/proto", "connect-protocol-version": "1" },
      body: Buffer.from(toBinary(StartSessionRequestSchema, create(StartSessionRequestSchema))),
      durationSec: d,
    }),
  });
  rows.push({
    scenario: "POST /api/session/start, 1 in flight", transport: "REST h1", baseline: "bare Fastify POST, 1 in flight REST h1",
    result: await seqLoad({ url: `${ctx.https}/api/session/start`, method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: "{}", durationSec: d }),
  });
  return rows;
}
