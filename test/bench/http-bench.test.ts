import { spawn } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { freshBundle } from "../../scripts/server-bundle.mjs"

/**
 * `npm run bench:http` with a tiny duration: it runs end to end on both
 * backends, prints the figures table (no request failed),
 * the start-up table and the targets with a verdict each, and leaves no child process behind, also when it is
 * stopped with Ctrl-C (SIGINT) half-way. No figure is asserted.
 */

const root = join(import.meta.dirname, "..", "..")

const run = (args: ReadonlyArray<string>, stopWhen?: RegExp) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [join(root, "bench/http.ts"), ...args], {
      cwd: root,
      env: { ...process.env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    let signalled = false
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString()
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString()
      if (stopWhen !== undefined && !signalled && stopWhen.test(stderr)) {
        signalled = true
        child.kill("SIGINT")
      }
    })
    child.once("exit", (code) => resolve({ code, stdout, stderr }))
  })

const childrenOf = (stdout: string): Array<number> => {
  const line = /^children: ([\d ]+)$/m.exec(stdout)
  expect(line, stdout).not.toBeNull()
  return line![1]!.trim().split(/\s+/).map(Number)
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ESRCH"
  }
}

describe("npm run bench:http", () => {
  it("prints the table for PostgreSQL and PGlite and stops every child", async () => {
    // Half a second a cell: at 0.2 s a pause of the server or the machine (a full collection, a
    // neighbour's burst) once left a cell with no answer at all, and so no figures to check.
    const { code, stdout, stderr } = await run(["--duration=0.5", "--warmup=0", "--server-warmup=0.8", "--wallets=3", "--backends=pg,pglite"])
    expect(code, stderr).toBe(0)
    expect(stdout).toMatch(/, 0\.8 s of server warm-up, /)
    // Each new server is warmed up before its first cell: calls made, none failed, the first and last shares' p50s
    // ("-" for a share of a tenth of a second in which no call came back: a new server's first call can take longer).
    // Which `npm start` ran: the bundle when it is fresh, else the sources and why (as the launcher decides).
    const { entry, reason } = freshBundle(root, undefined, "server")
    const runs = entry === undefined ? `the sources (${reason})` : "the bundle"
    for (const backend of ["pg", "pglite"]) {
      expect(stderr, stderr).toContain(`bench:http: ${backend}: healthy after `)
      expect(stderr).toMatch(new RegExp(`^bench:http: ${backend}: healthy after \\d+ ms, running ${runs.replace(/[()]/g, "\\$&")}; funding`, "m"))
    }
    for (const backend of ["pg", "pglite"]) {
      const warmUp = new RegExp(`^bench:http: ${backend}: server warm-up: (\\d+) calls in 0\\.8 s \\((\\d+) failed\\), not counted; ` +
        `p50 at one connection (\\d+\\.\\d\\d|-) ms in its first share, (\\d+\\.\\d\\d|-) ms in its last$`, "m").exec(stderr)
      expect(warmUp, stderr).not.toBeNull()
      expect(Number(warmUp![1])).toBeGreaterThan(0)
      expect(warmUp![2]).toBe("0")
      expect(stderr.indexOf(warmUp![0]), stderr).toBeLessThan(stderr.indexOf(`bench:http: ${backend}: POST /v1/proxy/openai, 1 connection(s), 1 (hot)`))
    }
    expect(stdout).toMatch(/\| backend +\| target +\| conn +\| wallets +\| req\/s +\| p50 ms +\| p99 ms +\| overhead p50 ms +\| ratio +\| server CPU ms\/req +\| DB tx\/req +\| WAL B\/req +\| DB CPU ms\/req +\| failed +\|/)
    for (const backend of ["pg", "pglite"]) {
      for (const target of ["upstream direct", "POST /v1/proxy/openai", "POST /v1/capabilities/reason"]) {
        for (const connections of [1, 16]) {
          expect(stdout).toMatch(new RegExp(`\\| ${backend} +\\| ${target.replaceAll("/", "\\/")} +\\| ${connections} +\\|`))
        }
      }
    }
    const rows = stdout.split("\n").filter((line) => /\| POST \/v1\//.test(line))
    expect(rows).toHaveLength(2 * 2 * 2 * 2)
    // No metered request failed (a refused key, an unfunded wallet or a rate limit would).
    for (const row of rows) {
      const cells = row.split("|").map((c) => c.trim())
      expect(cells[14], row).toBe("0")
    }
    // The stack's floor, on PostgreSQL only: its forwarded calls all answered.
    const floorRows = stdout.split("\n").filter((line) => /\| floor: forward \+ 1 commit /.test(line))
    expect(floorRows.map((row) => row.split("|").map((c) => c.trim()).slice(1, 4))).toEqual([["pg", "floor: forward + 1 commit", "1"], ["pg", "floor: forward + 1 commit", "16"]])
    for (const row of floorRows) expect(row.split("|").map((c) => c.trim())[14], row).toBe("0")
    // The database's work per request, on PostgreSQL only. The floor commits one write
    // transaction per request (other work on the server can only add to the count).
    for (const row of floorRows) {
      const [transactions, wal, cpu] = row.split("|").map((c) => c.trim()).slice(11, 14)
      expect(Number(transactions), row).toBeGreaterThanOrEqual(1)
      expect(Number(wal), row).toBeGreaterThan(0)
      expect(cpu, row).toMatch(/^\d+\.\d\d$/)
    }
    for (const row of rows) {
      const cells = row.split("|").map((c) => c.trim())
      if (cells[1] === "pg") {
        expect(Number(cells[11]), row).toBeGreaterThan(0)
        expect(Number(cells[12]), row).toBeGreaterThan(0)
        expect(cells[13], row).toMatch(/^\d+\.\d\d$/)
      } else {
        expect(cells.slice(11, 14), row).toEqual(["-", "-", "-"])
      }
    }
    expect(stdout).toMatch(
      /\| backend +\| start to healthy \/health ms +\| start-up CPU ms +\| RSS peak of start-up MB +\| idle after ms +\| RSS idle MB +\| RSS after the run MB +\| SIGTERM to exit ms +\| ended +\|/
    )
    for (const backend of ["pg", "pglite"]) {
      const row = stdout.split("\n").find((line) => new RegExp(`^\\| ${backend} +\\| \\d+ +\\|`).test(line))
      expect(row, stdout).toBeDefined()
      // The idle sample waits for the CPU to settle ("-" when it did not within the bound).
      const [, , , peak, , idle, after, stopMs] = row!.split("|").slice(1, -1).map((cell) => cell.trim())
      // Stopped by SIGTERM after the run: a graceful exit, within the bench's 10 s before SIGKILL.
      expect(row).toMatch(new RegExp(`^\\| ${backend} +\\| \\d+ +\\| \\d+ +\\| \\d+ +\\| (\\d+|-) +\\| \\d+ +\\| \\d+ +\\| \\d+ +\\| exit 0 +\\|$`))
      expect(Number(stopMs), row).toBeLessThan(10_000)
      // Start-up's peak is a high-water mark taken with the idle sample: never below it.
      expect(Number(peak), row).toBeGreaterThanOrEqual(Number(idle))
      expect(Number(after), row).toBeGreaterThan(0)
    }
    // The targets, last: twelve lines with this run's figure and a verdict (none on PostgreSQL over 3 wallets: those targets are for 256).
    expect(stdout).toMatch(/^The targets \(docs\/performance\.md\), this run; the floor's figure in the same cell beside:\n\| target +\| this run +\| met +\| floor +\|$/m)
    const targets = stdout.slice(stdout.indexOf("The targets")).split("\n").filter((line) => /^\| (overhead|≥|RSS|first healthy)/.test(line))
    expect(targets, stdout).toHaveLength(12)
    for (const line of targets) {
      const [target, figure, met, floor] = line.split("|").slice(1, -1).map((cell) => cell.trim())
      expect(figure, line).toMatch(/^\d+(\.\d\d)? (ms|\/s|MB)$/)
      expect(met, line).toMatch(target!.includes("PostgreSQL, 16 connections, 3 wallets") || target!.includes("PostgreSQL, 1 connection, 3 wallets") ? /^-$/ : /^(yes|no)$/)
      expect(floor, line).toMatch(/^(-|\d+(\.\d\d)?)$/)
    }
    const children = childrenOf(stdout)
    // The upstream, the floor and the two servers.
    expect(children).toHaveLength(4)
    expect(children.filter(alive)).toEqual([])
  }, 300_000)

  it("stops its children when interrupted with Ctrl-C", async () => {
    // Stopped once every child runs (the floor's measurement starts after the server and the floor are up).
    const { code, stdout } = await run(["--duration=1", "--warmup=0", "--server-warmup=0", "--wallets=2", "--backends=pg"], /the floor \(forward/)
    expect(code).toBe(130)
    const children = childrenOf(stdout)
    // The upstream, the floor and the server.
    expect(children).toHaveLength(3)
    expect(children.filter(alive)).toEqual([])
  }, 180_000)

  it("--against: both servers, interleaved blocks, both start orders; the table of builds and of their differences", async () => {
    const { code, stdout, stderr } = await run([
      "--against=.",
      "--against-env=SETTLE_WHEN_IDLE=wait",
      "--blocks=2",
      "--block=5",
      "--ab-warmup=10",
      "--wallets=2",
      "--ab-connections=2"
    ])
    expect(code, stderr).toBe(0)
    expect(stdout).toMatch(/^Spendgate HTTP benchmark, interleaved A\/B: .*, 2 connections, one hot wallet and 2 wallets/m)
    expect(stderr).toMatch(/POST \/v1\/proxy\/openai, 2 connections, 1 \(hot\) wallet\(s\): 1 blocks of 5 each/)
    expect(stdout).toMatch(/^A\/B, interleaved: server = .+; against = .+ with SETTLE_WHEN_IDLE=wait$/m)
    const builds = stdout.split("\n").filter((line) => /^\| pg +\| (1 \(hot\)|2) +\| (server|against) +\|/.test(line))
    expect(builds.map((line) => line.split("|").slice(2, 4).map((cell) => cell.trim()))).toEqual([
      ["1 (hot)", "server"],
      ["1 (hot)", "against"],
      ["2", "server"],
      ["2", "against"]
    ])
    // p90, p99, server CPU, DB CPU, the block p50s' spread, the blocks' median rate.
    for (const line of builds) {
      expect(line).toMatch(/\| \d+\.\d{3} +\| \d+\.\d{3} +\| \d+\.\d{3} +\| (\d+\.\d{3}|-) +\| -?\d+\.\d{3} - -?\d+\.\d{3} +\| \d+ +\|$/)
      expect(Number(line.split("|").at(-2)), line).toBeGreaterThan(0)
    }
    // One difference a block pair: two blocks a build and cell, one in each start order.
    const differences = stdout.split("\n").filter((line) => /^\| pg +\| (1 \(hot\)|2) +\| -?\d+\.\d{3} +\|/.test(line))
    expect(differences).toHaveLength(2)
    // Blocks faster each way, then the blocks' rates, against over server: median and spread.
    for (const line of differences) expect(line).toMatch(/\| \d \/ \d of 2 +\| \d+\.\d{3} +\| \d+\.\d{3} - \d+\.\d{3} +\|$/)
    // No cell of the ordinary run.
    expect(stdout).not.toMatch(/upstream direct|floor: forward/)
    const children = childrenOf(stdout)
    // The upstream and each server twice (started again in the other order).
    expect(children).toHaveLength(5)
    expect(children.filter(alive)).toEqual([])
  }, 300_000)

  it("--against-env refuses what is not NAME=value, before it starts anything", async () => {
    const { code, stderr } = await run(["--against=.", "--against-env=SETTLE_WHEN_IDLE"])
    expect(code).toBe(2)
    expect(stderr).toMatch(/--against-env takes NAME=value pairs/)
  }, 60_000)

  it("--ab-connections refuses what is not a whole number of at least 1, before it starts anything", async () => {
    for (const arg of ["--ab-connections=0", "--ab-connections=1.5", "--ab-connections=many"]) {
      const { code, stdout, stderr } = await run(["--against=.", arg])
      expect(code, arg).toBe(2)
      expect(stderr, arg).toMatch(/--ab-connections must be a whole number of at least 1/)
      expect(stdout, arg).toBe("")
    }
  }, 60_000)

  it("--warmup and --server-warmup refuse what is not a number of seconds, 0 or more, before they start anything", async () => {
    for (const arg of ["--server-warmup=-1", "--server-warmup=soon", "--server-warmup=", "--warmup=-0.5"]) {
      const { code, stdout, stderr } = await run([arg])
      expect(code, arg).toBe(2)
      expect(stderr, arg).toMatch(/must be a number of seconds, 0 or more/)
      expect(stdout, arg).toBe("")
    }
  }, 60_000)
})
