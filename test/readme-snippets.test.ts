import { execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"

/**
 * Every ```ts block of README.md is a program a reader may copy: each is
 * type-checked, importing the package by its public name (`spendgate`,
 * resolved through package.json `exports` like any dependent's import), and
 * then run with Node's type stripping; it must exit 0.
 */

const root = join(import.meta.dirname, "..")

/** The ```ts fenced blocks of a Markdown text, with the line each starts on. */
export const tsSnippets = (markdown: string): ReadonlyArray<{ readonly line: number; readonly code: string }> => {
  const snippets: Array<{ line: number; code: string }> = []
  const lines = markdown.split("\n")
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(ts|typescript)\s*$/.test(lines[i]!.trim())) continue
    const start = i + 1
    const body: Array<string> = []
    for (i = start; i < lines.length && lines[i]!.trim() !== "```"; i++) body.push(lines[i]!)
    snippets.push({ line: start + 1, code: body.join("\n") + "\n" })
  }
  return snippets
}

const snippets = tsSnippets(readFileSync(join(root, "README.md"), "utf8"))
// Inside the package, so `spendgate` resolves to this checkout by self-reference.
const dir = mkdtempSync(join(root, ".readme-snippets-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const files = snippets.map((snippet) => {
  const file = join(dir, `readme-line-${snippet.line}.ts`)
  writeFileSync(file, snippet.code)
  return { ...snippet, file }
})

describe("README.md TypeScript snippets", () => {
  it("finds the snippets (the extractor reads fenced ts blocks)", () => {
    expect(tsSnippets("a\n```ts\nconst x = 1\n```\n```sh\nls\n```\n```ts\nlet y\n```\n")).toEqual([
      { line: 3, code: "const x = 1\n" },
      { line: 9, code: "let y\n" }
    ])
    expect(snippets.length).toBeGreaterThan(0)
  })

  it("type-check, importing the package by its public name", () => {
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({ extends: "../tsconfig.json", compilerOptions: { noUnusedLocals: false }, include: ["*.ts"] })
    )
    const result = spawnSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", dir], {
      cwd: root,
      encoding: "utf8",
      timeout: 120_000
    })
    // Name the README line of each error, not the temporary file.
    const report = `${result.stdout}${result.stderr}`.replace(/[^\s(]*readme-line-(\d+)\.ts/g, "README.md snippet at line $1")
    expect(report.trim()).toBe("")
    expect(result.status).toBe(0)
  }, 120_000)

  for (const snippet of files) {
    it(`the snippet at README.md line ${snippet.line} runs`, () => {
      // Throws (with the output) on a non-zero exit.
      // "spendgate" resolves to this checkout's sources (not dist/) by the "spendgate-source" condition.
      execFileSync(process.execPath, ["--conditions=spendgate-source", snippet.file], { cwd: root, encoding: "utf8", timeout: 60_000, stdio: "pipe" })
    }, 60_000)
  }
})
