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
    fileParallelism: true,
    maxWorkers: 2
  }
})
