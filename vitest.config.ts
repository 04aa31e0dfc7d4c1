import { defaultServerConditions } from "vite"
import { defineConfig } from "vitest/config"

// `spendgate` and `spendgate/core` resolve to the TypeScript sources in this
// checkout (the "spendgate-source" export condition), never to dist/.
const conditions = ["spendgate-source", ...defaultServerConditions]

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    include: ["test/**/*.test.ts", "examples/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Test files share their worker's module cache (two workers, each running
    // files one after another) instead of a fresh process per file: every file
    // imported Effect, the adapters and the core anew, about an eighth of the
    // suite's time. Every file sets up its own layers, servers and databases;
    // the few that set an environment variable restore it when they finish, and
    // a new one that changes process-wide state must do the same.
    isolate: false,
    fileParallelism: true,
    maxWorkers: 2
  }
})
