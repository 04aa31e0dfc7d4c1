import { describe, expect, it } from "vitest"

/**
 * The test workers open and close many PGlite databases; on Node 24's V8 that
 * churn can hit a WebAssembly code GC race that kills the worker
 * (vitest.config.ts, README "How the suite runs"). The workers must run with
 * code GC off.
 */
describe("the test workers", () => {
  it("run with WebAssembly code GC off (vitest.config.ts execArgv)", () => {
    expect(process.execArgv).toContain("--no-wasm-code-gc")
  })
})
