import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";
import { UNIT_TESTS } from "./test/projects.js";

// Two projects (test/projects.ts says which file is which):
//   unit         no server, database, NATS, sqld, browser or child process;
//                runs in seconds: `npm run test:unit`
//   integration  everything else: `npm run test:integration`
// `npm test` runs both.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: UNIT_TESTS,
          // In-process code only: one worker thread keeps its module graph
          // across files instead of a fresh process (and imports) per file.
          pool: "threads",
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: ["test/**/*.test.ts"],
          exclude: UNIT_TESTS,
          pool: "forks",
          // Two files at a time on two cores (more where there are more):
          // the files wait on servers, PostgreSQL and NATS much of the time,
          // and since no test measures wall-clock time (timings belong to the
          // bench) nor sleeps for a fixed time, a busy neighbour file only
          // makes a test slower, not red. Each file has its own schema, NATS
          // namespace and ports.
          maxWorkers: Math.max(2, availableParallelism()),
          // (after the unit project: projects with their own maxWorkers run in groups)
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
