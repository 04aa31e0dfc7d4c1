import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { runSnippet, typeCheckSnippets, writeSnippets } from "../support/snippets.ts"

/**
 * The ```ts blocks of docs/testing.md: each type-checks, and each complete
 * program in it (one that ends in `Effect.runPromise`) runs with Node's
 * type stripping and exits 0. `spendgate` and `spendgate/testing` resolve by
 * the package's self-reference to this checkout's sources.
 */

const root = join(import.meta.dirname, "..", "..")
const { dir, files, remove } = writeSnippets(root, "docs/testing.md", "docs-snippets", "testing")
afterAll(remove)

describe("docs/testing.md snippets", () => {
  it("are found, and at least three are complete programs", () => {
    expect(files.length).toBeGreaterThanOrEqual(4)
    expect(files.filter((s) => s.code.includes("Effect.runPromise")).length).toBeGreaterThanOrEqual(3)
  })

  it("type-check", () => {
    const { report, status } = typeCheckSnippets(root, dir, "testing", "docs/testing.md")
    expect(report).toBe("")
    expect(status).toBe(0)
  }, 120_000)

  for (const snippet of files.filter((s) => s.code.includes("Effect.runPromise"))) {
    it(`the program at docs/testing.md line ${snippet.line} runs`, () => {
      runSnippet(root, snippet.file)
    }, 60_000)
  }
})
