// Which test files form the `unit` project (vitest.config.ts): files that
// start no server, database, NATS connection, libSQL server, browser or
// child process, so the project runs in seconds (`npm run test:unit`).
// Every other file under test/ is in the `integration` project.
//
// A new file is an integration test until it is listed here. To make it a
// unit test, add its path (or a glob for a folder of unit tests) here; test/lint/unit-project.test.ts fails when a file listed here
// imports, directly or through a local helper, one of UNIT_FORBIDDEN.

/** Globs (relative to the repository root) of the unit project's files. */
export const UNIT_TESTS = [
  "test/kernel/config.test.ts",
  "test/kernel/iso-time.test.ts",
  "test/kernel/module.test.ts",
  "test/kernel/paging.test.ts",
  "test/kernel/proto-wire-differential.test.ts",
  "test/kernel/retry.test.ts",
  "test/kernel/semaphore.test.ts",
  "test/kernel/write-once.test.ts",
  "test/lint/unit-project.test.ts",
  // the SDK's realtime against a scripted WebSocket
  "test/client/realtime-protocol.test.ts",
  "test/transport/http/**/*.test.ts",
  "test/transport/connect-node/**/*.test.ts",
  "test/transport/call/turn-batch.test.ts",
  "test/infra/libsql/**/*.test.ts",
  "test/infra/logging/**/*.test.ts",
  // isolated-vm sandboxes in the test's own process (no listener, no database server)
  "test/infra/sandbox/egress-address.test.ts",
  "test/infra/sandbox/error-stack.test.ts",
  "test/infra/sandbox/host-channel.test.ts",
  "test/infra/sandbox/isolate-metrics.test.ts",
  "test/infra/sandbox/isolate-sharing.test.ts",
  "test/infra/sandbox/sandbox.test.ts",
  "test/infra/sandbox/sync-slice.test.ts",
  "test/infra/sandbox/timers-hostile.test.ts",
  "test/infra/sandbox/timers.test.ts",
  "test/infra/sandbox/web-apis.test.ts",
  "test/capabilities/analytics/validation.test.ts",
  "test/capabilities/cms/meter-limiter.test.ts",
  "test/capabilities/cms/metering.test.ts",
  "test/capabilities/database/query-request-binary.test.ts",
  "test/capabilities/database/query-response-binary.test.ts",
  "test/capabilities/database/rest-json-path.test.ts",
  "test/capabilities/functions/function-runtime.test.ts",
  "test/capabilities/functions/http-message-binary.test.ts",
  "test/capabilities/functions/http-request.test.ts",
  "test/capabilities/functions/response-shaping.test.ts",
  "test/capabilities/functions/webhook-signature.test.ts",
  "test/server/metrics-collectors.test.ts",
];

/**
 * What a unit test may not import (module specifiers, and local files by
 * their path from the repository root): the helpers and fixtures that start
 * servers, databases, NATS, sqld, Chromium or child processes, and the
 * modules that do it themselves.
 */
export const UNIT_FORBIDDEN: readonly RegExp[] = [
  /^test\/helpers\/(server|db|cluster|child-server|child-worker|sqld|cli|nats-streams|ports)\.ts$/,
  /^test\/capabilities\/database\/harness\.ts$/,
  /^test\/capabilities\/cms\/cms-fixture\.ts$/,
  /^test\/capabilities\/console\/(browser|operator-session)\.ts$/,
  /^test\/transport\/rpc\/rpc-app\.ts$/,
  /^src\/server\/(server|worker|build|public-app|admin-app|cli)\.ts$/,
  /^src\/infra\/storage\/(pg-sql|pglite-sql)\.ts$/,
  /^@electric-sql\/pglite/,
  /^@nats-io\//,
  /^pg$/,
  /^playwright-core/,
  /^node:(child_process|cluster|http|https|http2|net)$/,
  /^(child_process|cluster|http|https|http2|net)$/,
];
