#!/usr/bin/env node
// `npx pulsebase` finds this through node_modules/.bin (a workspace's bin is
// linked there; the root package's own would send npx through its slow path,
// loading the whole dependency tree on every call): the CLI is bin/pulsebase.js.
import "../../bin/pulsebase.js";
