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
          // One file at a time on two cores: two at once saved only about a
          // fifth of the wall time (937 s of file time in 745 s) and made the
          // files that time an engine, a slice or a queue wait flaky. Each
          // file has its own schema, NATS namespace and ports, so
          // `--maxWorkers=2` runs two at a time where there are cores to spare.
          maxWorkers: Math.max(1, availableParallelism() - 1),
          // (after the unit project: projects with their own maxWorkers run in groups)
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
