#!/usr/bin/env node
// The operator CLI. Runs the TypeScript sources through tsx; `load` is the
// load generator, which lives outside the server's sources (tools/load).
import { register } from "tsx/esm/api";

register();
if (process.argv[2] === "load") await import("../tools/load/cli.ts");
else await import("../src/server/cli.ts");
