import { execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"

/**
 * The ```ts blocks of docs/testing.md: each type-checks, and each complete
 * program in it (one that ends in `Effect.runPromise`) runs with Node's
 * type stripping and exits 0. `spendgate/testing` is read from the source
 * (adapters/testing/index.ts), `spendgate` by the package's self-reference.
 */

const root = join(import.meta.dirname, "..", "..")

const blocks = (markdown: string): ReadonlyArray<{ readonly line: number; readonly code: string }> => {
  const found: Array<{ line: number; code: string }> = []
  const lines = markdown.split("\n")
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== "```ts") continue
    const start = i + 1
    const body: Array<string> = []
    for (i = start; i < lines.length && lines[i]!.trim() !== "```"; i++) body.push(lines[i]!)
    found.push({ line: start + 1, code: body.join("\n") + "\n" })
  }
  return found
}

const snippets = blocks(readFileSync(join(root, "docs/testing.md"), "utf8"))
const dir = mkdtempSync(join(root, ".docs-snippets-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const files = snippets.map((snippet) => {
  const file = join(dir, `testing-line-${snippet.line}.ts`)
  writeFileSync(file, snippet.code.replaceAll(`from "spendgate/testing"`, `from "../adapters/testing/index.ts"`))
  return { ...snippet, file }
})

describe("docs/testing.md snippets", () => {
  it("are found, and at least three are complete programs", () => {
    expect(snippets.length).toBeGreaterThanOrEqual(4)
    expect(snippets.filter((s) => s.code.includes("Effect.runPromise")).length).toBeGreaterThanOrEqual(3)
  })

  it("type-check", () => {
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({ extends: "../tsconfig.json", compilerOptions: { noUnusedLocals: false }, include: ["*.ts"] })
    )
    const result = spawnSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", dir], {
      cwd: root,
      encoding: "utf8",
      timeout: 120_000
    })
    const report = `${result.stdout}${result.stderr}`.replace(/[^\s(]*testing-line-(\d+)\.ts/g, "docs/testing.md snippet at line $1")
    expect(report.trim()).toBe("")
    expect(result.status).toBe(0)
  }, 120_000)

  for (const snippet of files.filter((s) => s.code.includes("Effect.runPromise"))) {
    it(`the program at docs/testing.md line ${snippet.line} runs`, () => {
      // "spendgate" resolves to this checkout's sources (not dist/) by the "spendgate-source" condition.
      execFileSync(process.execPath, ["--conditions=spendgate-source", snippet.file], { cwd: root, encoding: "utf8", timeout: 60_000, stdio: "pipe" })
    }, 60_000)
  }
})
