import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startServerProcess } from "../support/server-process.ts"

/**
 * The package as a user gets it: `npm pack` (which builds dist/ through
 * prepack), the tarball installed into a fresh project outside this
 * checkout, then used from there: plain JavaScript through the Promise
 * facade, TypeScript against the installed .d.ts, and the `spendgate` bin.
 *
 * No network: the fresh project gets a lockfile made from this repository's
 * (its production part), so `npm ci --offline` takes every dependency from
 * the npm cache that installing this repository filled.
 */

const root = join(import.meta.dirname, "..", "..")
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  name: string
  version: string
  dependencies: Record<string, string>
  exports: Record<string, string | { default: string; types: string; "spendgate-source": string }>
  engines: Record<string, string>
  license: string
}
// Node 24 first on PATH, so npm scripts and the bin run with it (the system `node` may be older).
const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env["PATH"] ?? ""}` }

let dir = ""
let tarball = ""

const run = (command: string, args: ReadonlyArray<string>, cwd: string, timeout = 60_000) => {
  const result = spawnSync(command, args, { cwd, env, encoding: "utf8", timeout })
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} exited with ${result.status ?? result.signal}:\n${result.stdout}\n${result.stderr}`)
  }
  return result.stdout
}

/** The registry address of a locked package's tarball (`node_modules/@scope/name` at a version). */
const tarballUrl = (path: string, version: string) => {
  const name = path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length)
  return `https://registry.npmjs.org/${name}/-/${name.split("/").at(-1)}-${version}.tgz`
}

/** The consumer's lockfile: the tarball, plus this repository's locked production dependencies. */
const consumerLock = (tarballName: string) => {
  const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
    packages: Record<string, { dev?: boolean; [key: string]: unknown }>
  }
  const packages: Record<string, unknown> = {
    "": { name: "consumer", version: "1.0.0", dependencies: { [pkg.name]: `file:${tarballName}` } },
    [`node_modules/${pkg.name}`]: {
      version: pkg.version,
      resolved: `file:${tarballName}`,
      license: pkg.license,
      dependencies: pkg.dependencies,
      bin: { spendgate: "bin/spendgate.js" },
      engines: pkg.engines
    }
  }
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path === "" || entry.dev === true) continue
    // A lock written without download addresses would make npm ask the registry for each
    // package's metadata; with its tarball address and integrity, the cache alone serves it.
    packages[path] = entry["resolved"] === undefined && typeof entry["version"] === "string" && entry["link"] !== true
      ? { ...entry, resolved: tarballUrl(path, entry["version"]) }
      : entry
  }
  return { name: "consumer", version: "1.0.0", lockfileVersion: 3, requires: true, packages }
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "spendgate-pack-"))
  run("npm", ["pack", "--pack-destination", dir, "--silent"], root, 120_000)
  tarball = readdirSync(dir).find((name) => name.endsWith(".tgz")) ?? ""
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({ name: "consumer", version: "1.0.0", private: true, type: "module", dependencies: { [pkg.name]: `file:${tarball}` } })
  )
  writeFileSync(join(dir, "package-lock.json"), JSON.stringify(consumerLock(tarball)))
  run("npm", ["ci", "--offline", "--no-audit", "--no-fund"], dir, 120_000)
}, 170_000)

afterAll(() => {
  if (dir !== "") rmSync(dir, { recursive: true, force: true })
})

describe("the packed package, installed into a fresh project", () => {
  it("holds the built JavaScript and declarations of every export, and no TypeScript sources", () => {
    expect(tarball).toBe(`${pkg.name}-${pkg.version}.tgz`)
    const installed = join(dir, "node_modules", pkg.name)
    for (const [entry, target] of Object.entries(pkg.exports)) {
      if (typeof target === "string") continue
      // An entry whose sources are not in this checkout yet is not built either.
      if (!existsSync(join(root, target["spendgate-source"]))) continue
      expect(existsSync(join(installed, target.default)), `${entry} -> ${target.default}`).toBe(true)
      expect(existsSync(join(installed, target.types)), `${entry} -> ${target.types}`).toBe(true)
    }
    expect(existsSync(join(installed, "dist/config/prices.json"))).toBe(true)
    expect(existsSync(join(installed, "dist/adapters/providers/kit/parse-worker.js"))).toBe(true)
    expect(existsSync(join(installed, "adapters"))).toBe(false)
    expect(existsSync(join(installed, "src"))).toBe(false)
  })

  it("plain JavaScript makes a paid call through the Promise facade, and every entry imports", () => {
    writeFileSync(
      join(dir, "app.mjs"),
      `import { createGateway, SpendgateError } from "spendgate"
import * as core from "spendgate/core"
import * as server from "spendgate/server"
import * as testing from "spendgate/testing"

const gateway = await createGateway({ storage: "memory" })
const owner = await gateway.signup("operator")
const worker = await gateway.createAgent(owner.apiKey, { name: "worker" })
await gateway.setPolicy(owner.apiKey, worker.agentId, { maxPerCallMicroUsd: 50_000 })
await gateway.credit({ accountId: owner.accountId, key: "funding-1", amountMicroUsd: 1_000_000 })
const { value, receipt } = await gateway.spend(worker.apiKey, {
  capability: "search", provider: "mine", quotedMicroUsd: 30_000,
  run: async () => ({ value: "found", actualMicroUsd: 12_500 })
})
let refused = "none"
try {
  await gateway.spend(worker.apiKey, { capability: "search", provider: "mine", quotedMicroUsd: 60_000, run: async () => ({ value: 0, actualMicroUsd: 0 }) })
} catch (error) {
  refused = error instanceof SpendgateError ? error.code : String(error)
}
const balance = (await gateway.balance(owner.apiKey)).usdMicroUsd
await gateway.close()
console.log(JSON.stringify({
  value, charged: String(receipt.chargedMicroUsd), balance: String(balance), refused,
  core: typeof core.Spend, testing: typeof testing.TestGateway, server: [typeof server.serveGateway, typeof server.serverLayer, typeof server.serveFromEnvironment].join(",")
}))
`
    )
    const output = run(process.execPath, ["app.mjs"], dir)
    expect(JSON.parse(output.trim())).toEqual({
      value: "found",
      charged: "12500",
      balance: "987500",
      refused: "PER_CALL_LIMIT_EXCEEDED",
      core: "function",
      testing: "object",
      server: "function,function,object"
    })
  }, 60_000)

  it("the files the built code reads at run time are where it looks: the parse worker and the price file", () => {
    // Internal modules, reached by path: no export names them.
    writeFileSync(
      join(dir, "internals.mjs"),
      `import { Effect } from "effect"
const dist = new URL("./node_modules/spendgate/dist/adapters/", import.meta.url)
const { makePool } = await import(new URL("providers/kit/parse-pool.js", dist).href)
const { loadPriceCards } = await import(new URL("priceCards.js", dist).href)
const pool = makePool({ maxWorkers: 1 })
const page = "<html><head><title>Packed</title></head><body><article><h1>Packed</h1><p>" + "A paragraph long enough to be the article. ".repeat(20) + "</p></article></body></html>"
const read = await Effect.runPromise(pool.run({ kind: "read", html: page, pageUrl: "https://example.com/a" }, 20_000))
await pool.close()
const prices = await Effect.runPromise(loadPriceCards(undefined))
console.log(JSON.stringify({ ok: read.ok, title: read.output?.title, prices: prices.size > 0 }))
`
    )
    expect(JSON.parse(run(process.execPath, ["internals.mjs"], dir).trim())).toEqual({ ok: true, title: "Packed", prices: true })
  }, 60_000)

  it("the built code finds the package's version: the OTLP service.version and dev:pay's --version", () => {
    // dist/ sits one folder deeper than the sources: a path fixed relative to the module misses package.json.
    expect(run(process.execPath, ["node_modules/spendgate/dist/adapters/cli/dev-pay.js", "--version"], dir).trim()).toBe(
      `spendgate v${pkg.version}`
    )
    writeFileSync(
      join(dir, "version.mjs"),
      `const { serviceVersion } = await import(new URL("./node_modules/spendgate/dist/adapters/http/otlp.js", import.meta.url).href)
console.log(JSON.stringify({ serviceVersion: serviceVersion() }))
`
    )
    expect(JSON.parse(run(process.execPath, ["version.mjs"], dir).trim())).toEqual({ serviceVersion: pkg.version })
  }, 60_000)

  it("TypeScript on the Effect API type-checks against the installed declarations and runs", () => {
    writeFileSync(
      join(dir, "app.ts"),
      `import { Effect } from "effect"
import { Agents, Spend, Spendgate, Wallets, type SpendReceipt } from "spendgate"
import type { HttpOptions } from "spendgate/server"

const options: HttpOptions = { port: 0, host: "127.0.0.1" }

const program = Effect.gen(function*() {
  const agents = yield* Agents
  const account = yield* agents.signup({ name: "operator" })
  const owner = yield* agents.authenticate(account.apiKey)
  yield* (yield* Wallets).credit({ accountId: account.accountId, key: "f", pocket: "usd", amount: 100_000n, description: "funding" })
  const { receipt } = yield* (yield* Spend).spend(owner, {
    capability: "search",
    provider: "mine",
    quotedMicroUsd: 2_000n,
    description: "one search",
    run: Effect.succeed({ value: 1, actualMicroUsd: 1_500n })
  })
  const charged: SpendReceipt["chargedMicroUsd"] = receipt.chargedMicroUsd
  return charged
})

const charged: bigint = await Effect.runPromise(program.pipe(Effect.provide(Spendgate.memory({ background: false }))))
console.log(\`charged \${charged} on port option \${options.port}\`)
`
    )
    writeFileSync(
      join(dir, "bad.ts"),
      `import { createGateway } from "spendgate"
// A wrong argument must not type-check: the declarations are real, not \`any\`.
await createGateway({ storage: "floppy" })
`
    )
    const tsconfig = (files: ReadonlyArray<string>) =>
      JSON.stringify({
        compilerOptions: {
          target: "ES2023",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          lib: ["ES2023"],
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          typeRoots: [join(root, "node_modules/@types")],
          types: ["node"]
        },
        files
      })
    const tsc = join(root, "node_modules/typescript/bin/tsc")
    writeFileSync(join(dir, "tsconfig.json"), tsconfig(["app.ts"]))
    run(process.execPath, [tsc, "-p", "tsconfig.json"], dir)
    writeFileSync(join(dir, "tsconfig.bad.json"), tsconfig(["bad.ts"]))
    const bad = spawnSync(process.execPath, [tsc, "-p", "tsconfig.bad.json"], { cwd: dir, env, encoding: "utf8", timeout: 60_000 })
    expect(bad.status).not.toBe(0)
    expect(bad.stdout).toContain("floppy")

    expect(run(process.execPath, ["app.ts"], dir).trim()).toBe("charged 1500 on port option 0")
  }, 90_000)

  it("npx spendgate --version and --help run the installed bin", () => {
    expect(run("npx", ["--offline", "--no-install", "spendgate", "--version"], dir).trim()).toBe(`spendgate v${pkg.version}`)
    const help = run("npx", ["--offline", "--no-install", "spendgate", "--help"], dir)
    expect(help).toContain("serve")
    expect(help).toContain("mcp")
  }, 60_000)

  it("spendgate serve runs the installed server's built entry point: it listens and answers, /docs included", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "spendgate-pack-serve-"))
    const bin = join(dir, "node_modules", pkg.name, "bin", "spendgate.js")
    expect(existsSync(join(dir, "node_modules", pkg.name, "dist", "adapters", "http", "main.js"))).toBe(true)
    const server = await startServerProcess({ DATA_DIR: dataDir, HOST: "127.0.0.1" }, 60_000, [bin, "serve"])
    try {
      expect((await fetch(`${server.baseUrl}/health`)).status).toBe(200)
      // Scalar's bundle, read from the installed Effect package when the page is first asked for.
      const docs = await fetch(`${server.baseUrl}/docs`)
      expect(docs.status).toBe(200)
      expect(await docs.text()).toContain("window.Scalar.createApiReference(")
    } finally {
      await server.stop()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 90_000)
})
