import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { runSnippet, tsSnippets, typeCheckSnippets, writeSnippets } from "./support/snippets.ts"

/**
 * Every ```ts block of README.md is a program a reader may copy: each is
 * type-checked, importing the package by its public name (`spendgate`,
 * resolved through package.json `exports` like any dependent's import), and
 * then run with Node's type stripping; it must exit 0.
 */

const root = join(import.meta.dirname, "..")
// Inside the package, so `spendgate` resolves to this checkout by self-reference.
const { dir, files, remove } = writeSnippets(root, "README.md", "readme-snippets", "readme")
afterAll(remove)

describe("README.md TypeScript snippets", () => {
  it("finds the snippets (the extractor reads fenced ts blocks)", () => {
    expect(tsSnippets("a\n```ts\nconst x = 1\n```\n```sh\nls\n```\n```ts\nlet y\n```\n")).toEqual([
      { line: 3, code: "const x = 1\n" },
      { line: 9, code: "let y\n" }
    ])
    expect(files.length).toBeGreaterThan(0)
  })

  it("type-check, importing the package by its public name", () => {
    const { report, status } = typeCheckSnippets(root, dir, "readme", "README.md")
    expect(report).toBe("")
    expect(status).toBe(0)
  }, 120_000)

  for (const snippet of files) {
    it(`the snippet at README.md line ${snippet.line} runs`, () => {
      runSnippet(root, snippet.file)
    }, 60_000)
  }
})
