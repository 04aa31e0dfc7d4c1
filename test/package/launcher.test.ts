import { execFileSync, spawnSync } from "node:child_process"
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { delimiter, dirname, join } from "node:path"
import { describe, expect, it } from "vitest"
import { startServerProcess } from "../support/server-process.ts"

/**
 * bin/spendgate.js, the `spendgate` command and `npm start`: on a Node older
 * than 22.19 one clear line and exit 1 (this is what `npm ci --omit=dev &&
 * npm start` meets on a system Node 20); on this Node the subcommands.
 */

const root = join(import.meta.dirname, "..", "..")
const launcher = join(root, "bin/spendgate.js")
const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version

/** A `node` on PATH older than 22, if the machine has one. */
const oldNode = (() => {
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    if (dir === "") continue
    const candidate = join(dir, "node")
    try {
      const found = execFileSync(candidate, ["-p", "process.versions.node"], { encoding: "utf8", timeout: 10_000 }).trim()
      if (Number(found.split(".")[0]) < 22) return { path: candidate, version: found }
    } catch {
      // not there, or not runnable
    }
  }
  return undefined
})()

describe("bin/spendgate.js", () => {
  it.skipIf(oldNode === undefined)(
    `refuses an old Node in one line with exit code 1 (${oldNode === undefined ? "skipped: no Node older than 22 on PATH" : `Node ${oldNode.version}`})`,
    () => {
      for (const args of [["serve"], ["--version"], []]) {
        const result = spawnSync(oldNode!.path, [launcher, ...args], { cwd: root, encoding: "utf8", timeout: 10_000 })
        expect(result.status).toBe(1)
        expect(result.stdout).toBe("")
        const lines = result.stderr.trim().split("\n")
        expect(lines).toHaveLength(1)
        expect(lines[0]).toContain("needs Node.js 22.19 or newer")
        expect(lines[0]).toContain(`this is Node.js ${oldNode!.version}`)
        expect(lines[0]).toContain("install Node.js 24")
        expect(lines[0]).toContain("without --omit=dev")
      }
    }
  )

  it.skipIf(oldNode === undefined)("npm start where npm's node is old (as after npm ci --omit=dev) prints the refusal, not a crash", () => {
    // A copy of the package without node_modules: no node_modules/.bin/node, so npm start finds the old node.
    const dir = mkdtempSync(join(tmpdir(), "spendgate-launcher-"))
    try {
      cpSync(join(root, "package.json"), join(dir, "package.json"))
      cpSync(join(root, "bin"), join(dir, "bin"), { recursive: true })
      const npm = join(dirname(oldNode!.path), "npm")
      const result = spawnSync(oldNode!.path, [npm, "start", "--silent"], {
        cwd: dir,
        encoding: "utf8",
        timeout: 30_000,
        env: { ...process.env, PATH: `${dirname(oldNode!.path)}${delimiter}/usr/bin${delimiter}/bin` }
      })
      expect(result.status).toBe(1)
      expect(result.stderr).toMatch(/^spendgate needs Node\.js 22\.19 or newer, but this is Node\.js 2\d\./)
      expect(result.stderr).not.toMatch(/SyntaxError|ERR_|\n\s+at /)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("--version and --help on this Node", () => {
    expect(execFileSync(process.execPath, [launcher, "--version"], { cwd: root, encoding: "utf8" }).trim()).toBe(
      `spendgate v${version}`
    )
    const help = execFileSync(process.execPath, [launcher, "--help"], { cwd: root, encoding: "utf8" })
    expect(help).toMatch(/serve\s+Serve the HTTP API/)
    expect(help).toMatch(/mcp\s+Serve MCP over stdio/)
  })

  it("serve (npm start) listens and answers, like the server's own entry point", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "spendgate-serve-"))
    const server = await startServerProcess({ DATA_DIR: dataDir, HOST: "127.0.0.1" }, 60_000, [launcher, "serve"])
    try {
      const response = await fetch(`${server.baseUrl}/health`)
      expect(response.status).toBe(200)
    } finally {
      await server.stop()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 90_000)

  it("an unknown subcommand is refused with a non-zero exit", () => {
    const result = spawnSync(process.execPath, [launcher, "frobnicate"], { cwd: root, encoding: "utf8", timeout: 20_000 })
    expect(result.status).not.toBe(0)
    expect(`${result.stdout}${result.stderr}`).toContain("frobnicate")
  })

  it("mcp without a key: one line naming SPENDGATE_API_KEY, exit 2, nothing on stdout", () => {
    const env = { ...process.env }
    delete env["SPENDGATE_API_KEY"]
    const result = spawnSync(process.execPath, [launcher, "mcp"], { cwd: root, encoding: "utf8", timeout: 20_000, env })
    expect(result.status).toBe(2)
    expect(result.stdout).toBe("")
    expect(result.stderr).toContain("SPENDGATE_API_KEY")
  })
})
