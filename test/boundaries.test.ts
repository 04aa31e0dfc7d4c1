import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"

/**
 * The import boundaries (.dependency-cruiser.cjs) hold on the code base,
 * apart from the known violations listed in
 * .dependency-cruiser-known-violations.json; and each rule really refuses
 * what it names (checked on a small tree of fixture files).
 */

const root = join(import.meta.dirname, "..")
const depcruise = join(root, "node_modules/dependency-cruiser/bin/dependency-cruiser.mjs")

const cruise = (cwd: string, args: ReadonlyArray<string>) =>
  spawnSync(process.execPath, [depcruise, "--config", join(root, ".dependency-cruiser.cjs"), ...args], {
    cwd,
    encoding: "utf8",
    timeout: 120_000
  })

const fixtures = mkdtempSync(join(root, ".boundaries-fixture-"))
afterAll(() => rmSync(fixtures, { recursive: true, force: true }))
const write = (path: string, text: string) => {
  mkdirSync(dirname(join(fixtures, path)), { recursive: true })
  writeFileSync(join(fixtures, path), text)
}

describe("import boundaries", () => {
  it("hold on src/, adapters/, examples/ and bench/ (npm run boundaries)", () => {
    const result = cruise(root, [
      "--ignore-known",
      ".dependency-cruiser-known-violations.json",
      "--output-type",
      "err",
      "src",
      "adapters",
      "examples",
      "bench"
    ])
    expect(`${result.stdout}${result.stderr}`).toContain("no dependency violations found")
    expect(result.status).toBe(0)
  }, 120_000)

  it("each rule refuses what it names, and allows the rest", () => {
    write("src/ports/Port.ts", "export const port = 1\n")
    write("src/bad.ts", [
      `import { readFileSync } from "node:fs"`,
      `import { HttpRouter } from "effect/http"`,
      `import type { SqlClient } from "effect/sql"`,
      `import { adapter } from "../adapters/rails/rail.ts"`,
      `import { port } from "./ports/Port.ts"`,
      `export const all = [readFileSync, HttpRouter, adapter, port] as const`,
      `export type S = SqlClient.SqlClient`,
      ""
    ].join("\n"))
    write("src/ok.ts", `import { Effect } from "effect"\nimport { port } from "./ports/Port.ts"\nexport const ok = [Effect.void, port]\n`)
    write("adapters/providers/kit/exchange.ts", "export const exchange = 1\n")
    write("adapters/providers/b/b.ts", "export const b = 1\n")
    write("adapters/providers/a/own.ts", "export const own = 1\n")
    write(
      "adapters/providers/a/a.ts",
      `import { b } from "../b/b.ts"\nimport { exchange } from "../kit/exchange.ts"\nimport { own } from "./own.ts"\nexport const a = [b, exchange, own]\n`
    )
    write("adapters/http/errors.ts", "export const errors = 1\n")
    write("adapters/http/server.ts", `import { errors } from "./errors.ts"\nimport { rates } from "../rates/rates.ts"\nexport const server = [errors, rates]\n`)
    write("adapters/rates/rates.ts", "export const rates = 1\n")
    write("adapters/rails/rail.ts", `import { errors } from "../http/errors.ts"\nexport const adapter = errors\n`)
    write("adapters/missing.ts", `import { gone } from "./gone.ts"\nexport const missing = gone\n`)

    const result = cruise(fixtures, ["--output-type", "json", "src", "adapters"])
    const report = JSON.parse(result.stdout) as {
      summary: { violations: ReadonlyArray<{ from: string; to: string; rule: { name: string } }> }
    }
    const found = report.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to.replace(/^.*node_modules\//, "")}`).sort()
    expect(found).toEqual([
      "core-no-http-or-sql: src/bad.ts -> effect/dist/http/index.js",
      "core-no-http-or-sql: src/bad.ts -> effect/dist/sql/index.js",
      "core-no-node-builtins: src/bad.ts -> fs",
      "core-not-to-adapters: src/bad.ts -> adapters/rails/rail.ts",
      "http-rates-through-port: adapters/http/server.ts -> adapters/rates/rates.ts",
      "not-to-unresolvable: adapters/missing.ts -> ./gone.ts",
      "only-http-imports-http: adapters/rails/rail.ts -> adapters/http/errors.ts",
      "providers-not-sideways: adapters/providers/a/a.ts -> adapters/providers/b/b.ts"
    ])
    // The check (the `err` reporter, as `npm run boundaries` uses) fails on them.
    const check = cruise(fixtures, ["--output-type", "err", "src", "adapters"])
    expect(check.stdout).toContain("8 dependency violations")
    expect(check.status).not.toBe(0)
  }, 120_000)
})
