#!/usr/bin/env node
// The operator CLI. Runs the TypeScript sources through tsx.
import { register } from "tsx/esm/api";

register();
await import("../src/server/cli.ts");
