import { execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"

/**
 * The ```ts blocks of a Markdown document as programs a reader may copy
 * (README.md, docs/testing.md): extracted, written to a temporary folder
 * inside the checkout (so `spendgate` resolves to it by self-reference),
 * type-checked together, and each run with Node's type stripping.
 */

export interface Snippet {
  readonly line: number
  readonly code: string
}

/** The ```ts fenced blocks of a Markdown text, with the line each starts on. */
export const tsSnippets = (markdown: string): ReadonlyArray<Snippet> => {
  const snippets: Array<Snippet> = []
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

/**
 * The snippets of `document` (a path under `root`) written as `<prefix>-line-N.ts`
 * in a fresh folder `.<folder>-…` under `root`; `remove` deletes the folder.
 */
export const writeSnippets = (root: string, document: string, folder: string, prefix: string) => {
  const snippets = tsSnippets(readFileSync(join(root, document), "utf8"))
  const dir = mkdtempSync(join(root, `.${folder}-`))
  const files = snippets.map((snippet) => {
    const file = join(dir, `${prefix}-line-${snippet.line}.ts`)
    writeFileSync(file, snippet.code)
    return { ...snippet, file }
  })
  return { dir, files, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

/**
 * Type-checks every snippet of the folder with the project's compiler options;
 * the report names each error by the document's line, empty when all check.
 */
export const typeCheckSnippets = (root: string, dir: string, prefix: string, document: string) => {
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({ extends: "../tsconfig.json", compilerOptions: { noUnusedLocals: false }, include: ["*.ts"] })
  )
  const result = spawnSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", dir], {
    cwd: root,
    encoding: "utf8",
    timeout: 120_000
  })
  const report = `${result.stdout}${result.stderr}`.replace(new RegExp(`[^\\s(]*${prefix}-line-(\\d+)\\.ts`, "g"), `${document} snippet at line $1`)
  return { report: report.trim(), status: result.status }
}

/**
 * Runs one snippet; throws (with its output) on a non-zero exit. `spendgate`
 * resolves to this checkout's sources (not dist/) by the "spendgate-source" condition.
 */
export const runSnippet = (root: string, file: string) =>
  execFileSync(process.execPath, ["--conditions=spendgate-source", file], { cwd: root, encoding: "utf8", timeout: 60_000, stdio: "pipe" })
