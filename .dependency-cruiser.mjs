// The layer rules of src/ (docs/architecture.md), checked by `npm run lint:deps`
// in .ci/run. Each layer imports only the layers below it:
//   kernel <- infra <- capabilities <- transport <- server
// gen/ (generated from proto/) may be imported from kernel upwards.
// A capability's interface: what other capabilities and the transport may
// import (its module definition and the types it hands out).
const capabilityInterface = "^src/capabilities/[^/]+/(index|[^/]+-module)[.]ts$";

/** @type {import("dependency-cruiser").IConfiguration} */
export default {
  forbidden: [
    {
      name: "kernel-is-pure",
      comment: "src/kernel holds pure helpers: it imports nothing of src outside itself (gen/ is allowed).",
      severity: "error",
      from: { path: "^src/kernel/" },
      to: { path: "^src/", pathNot: "^src/kernel/" },
    },
    {
      name: "infra-imports-kernel-and-infra",
      comment: "Infrastructure (src/infra/*) imports only the kernel and other infrastructure.",
      severity: "error",
      from: { path: "^src/infra/" },
      to: { path: "^(src/(capabilities|transport|server)/|gen/)" },
    },
    {
      name: "capability-not-transport-or-server",
      comment: "A capability imports the kernel, infrastructure and gen/, never the transport or the server.",
      severity: "error",
      from: { path: "^src/capabilities/" },
      to: { path: "^src/(transport|server)/" },
    },
    {
      name: "capability-through-interface",
      comment: "A capability uses another one only through its index.ts or <name>-module.ts.",
      severity: "error",
      from: { path: "^src/capabilities/([^/]+)/" },
      to: { path: "^src/capabilities/", pathNot: ["^src/capabilities/$1/", capabilityInterface] },
    },
    {
      name: "transport-through-interface",
      comment: "The transport imports capabilities only through their index.ts or <name>-module.ts, and never the server.",
      severity: "error",
      from: { path: "^src/transport/" },
      to: { path: "^src/(capabilities|server)/", pathNot: capabilityInterface },
    },
    {
      name: "storage-driver-private",
      comment: "Driver errors are translated inside src/infra/storage (sql.ts tells callers what a failure means); only storage and the server's opening code see the drivers.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/(infra/storage|server)/" },
      to: { path: "^src/infra/storage/(pg-errors|pg-sql|pglite-sql)[.]ts$" },
    },
    {
      name: "no-circular",
      comment: "No module imports itself through others.",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "no-folder-cycles",
      comment: "No folder depends on itself through others (capabilities, infrastructure pieces and layers form a graph without cycles).",
      severity: "error",
      scope: "folder",
      from: { path: "^src/" },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      extensions: [".ts", ".js", ".mjs", ".json"],
    },
  },
};
