import { defineConfig } from "vitest/config";
import { UNIT_TESTS } from "./test/projects.js";
export default defineConfig({
  test: {
    
    testTimeout: 30_000,
    hookTimeout: 60_000,
    include: ["test/**/*.test.ts"],
    exclude: UNIT_TESTS,
    pool: "forks",
    isolate: false,
    maxWorkers: 2,
  },
});
