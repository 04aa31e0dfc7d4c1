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
    maxWorkers: 2,
    // Each worker opens and closes many PGlite (WebAssembly) databases. On
    // Node 24's V8 (13.6) WebAssembly code GC can free an import wrapper that
    // another thread has just looked up, and the process dies on a V8 CHECK
    // (`jit_page_->allocations_.erase(addr) == 1`, nodejs/node#64500): a
    // worker's whole test file lost, now and then. Code GC off in the test
    // workers takes that path away; the few megabytes of dead wrapper code it
    // keeps are freed with the worker (README, "How the suite runs").
    execArgv: ["--no-wasm-code-gc"]
  }
})
