import { describe, expect, it } from "vitest"
import { checkTargets, type TargetCell, type TargetStart } from "../../bench/targets.ts"

/**
 * bench:http's targets table (bench/targets.ts) on made-up figures: each
 * target's verdict on both sides of its limit, the floor's figure beside it,
 * "-" where the run did not measure the cell, and no verdict over many
 * wallets unless the run used the targets' 256.
 */

const direct = { p50: 0.2, p99: 0.5 }
const cells = (figures: { overheadP50: number; overheadP99: number; many: number; hot: number; pglite: number }, wallets = "256"): Array<TargetCell> => [
  { backend: "pg", target: "floor: forward + 1 commit", connections: 1, wallets: "-", rps: 900, p50: 0.9, p99: 4.5, direct },
  { backend: "pg", target: "floor: forward + 1 commit", connections: 16, wallets: "-", rps: 2100, p50: 7, p99: 20, direct },
  ...(["1 (hot)", wallets] as const).flatMap((w) => [
    {
      backend: "pg",
      target: "POST /v1/proxy/openai",
      connections: 1,
      wallets: w,
      rps: 500,
      p50: direct.p50 + figures.overheadP50,
      p99: direct.p99 + figures.overheadP99,
      direct
    },
    { backend: "pg", target: "POST /v1/proxy/openai", connections: 16, wallets: w, rps: w === "1 (hot)" ? figures.hot : figures.many, p50: 12, p99: 30, direct },
    { backend: "pglite", target: "POST /v1/proxy/openai", connections: 16, wallets: w, rps: figures.pglite, p50: 30, p99: 60, direct },
    // The reason route is in the table but in no target.
    { backend: "pg", target: "POST /v1/capabilities/reason", connections: 16, wallets: w, rps: 1, p50: 99, p99: 99, direct }
  ])
]
const starts = (pgMs: number, pgliteMs: number, idle: number, after: number): Array<TargetStart> => [
  { backend: "pg", startMs: pgMs, rssIdleMb: idle, rssAfterMb: after },
  { backend: "pglite", startMs: pgliteMs, rssIdleMb: 400, rssAfterMb: 500 }
]

const verdicts = (lines: ReturnType<typeof checkTargets>) => lines.map((line) => [line.target, line.figure, line.met, line.floor])

describe("bench:http's targets", () => {
  it("every target met: figures inside every limit", () => {
    const lines = checkTargets(cells({ overheadP50: 0.95, overheadP99: 4.9, many: 2000, hot: 1000, pglite: 400 }), starts(999, 1999, 150, 200), 256)
    expect(verdicts(lines)).toEqual([
      ["overhead p50 ≤ 1 ms: proxy, PostgreSQL, 1 connection, one hot wallet", "0.95 ms", "yes", "0.70"],
      ["overhead p50 ≤ 1 ms: proxy, PostgreSQL, 1 connection, 256 wallets", "0.95 ms", "yes", "0.70"],
      ["overhead p99 ≤ 5 ms: proxy, PostgreSQL, 1 connection, one hot wallet", "4.90 ms", "yes", "4.00"],
      ["overhead p99 ≤ 5 ms: proxy, PostgreSQL, 1 connection, 256 wallets", "4.90 ms", "yes", "4.00"],
      ["≥ 2,000 calls/s: proxy, PostgreSQL, 16 connections, 256 wallets", "2000 /s", "yes", "2100"],
      ["≥ 1,000 calls/s: proxy, PostgreSQL, 16 connections, one hot wallet", "1000 /s", "yes", "2100"],
      ["≥ 400 calls/s: proxy, PGlite, 16 connections, one hot wallet", "400 /s", "yes", "-"],
      ["≥ 400 calls/s: proxy, PGlite, 16 connections, 256 wallets", "400 /s", "yes", "-"],
      ["RSS ≤ 150 MB idle: PostgreSQL", "150 MB", "yes", "-"],
      ["RSS ≤ 200 MB after the run: PostgreSQL", "200 MB", "yes", "-"],
      ["first healthy answer ≤ 1 s: PostgreSQL", "999 ms", "yes", "-"],
      ["first healthy answer ≤ 2 s: PGlite, fresh data directory", "1999 ms", "yes", "-"]
    ])
  })

  it("every target missed: figures just past every limit", () => {
    const lines = checkTargets(cells({ overheadP50: 1.01, overheadP99: 5.01, many: 1999, hot: 999, pglite: 399 }), starts(1001, 2001, 151, 201), 256)
    expect(lines.map((line) => line.met)).toEqual(Array(12).fill("no"))
    expect(lines.map((line) => line.figure)).toEqual([
      "1.01 ms", "1.01 ms", "5.01 ms", "5.01 ms", "1999 /s", "999 /s", "399 /s", "399 /s", "151 MB", "201 MB", "1001 ms", "2001 ms"
    ])
  })

  it("a run over fewer wallets than the targets' 256 gives no verdict over many wallets; an unmeasured cell is '-'", () => {
    const some = cells({ overheadP50: 0.5, overheadP99: 1, many: 5000, hot: 5000, pglite: 5000 }, "3").filter((c) => c.backend === "pg")
    const lines = checkTargets(some, starts(500, 1500, 100, 150).slice(0, 1), 3)
    const byTarget = new Map(lines.map((line) => [line.target, line]))
    expect(byTarget.get("overhead p50 ≤ 1 ms: proxy, PostgreSQL, 1 connection, 3 wallets")).toMatchObject({ figure: "0.50 ms", met: "-" })
    expect(byTarget.get("overhead p50 ≤ 1 ms: proxy, PostgreSQL, 1 connection, one hot wallet")).toMatchObject({ met: "yes" })
    expect(byTarget.get("≥ 2,000 calls/s: proxy, PostgreSQL, 16 connections, 3 wallets")).toMatchObject({ figure: "5000 /s", met: "-" })
    expect(byTarget.get("≥ 400 calls/s: proxy, PGlite, 16 connections, one hot wallet")).toMatchObject({ figure: "-", met: "-" })
    expect(byTarget.get("first healthy answer ≤ 2 s: PGlite, fresh data directory")).toMatchObject({ figure: "-", met: "-" })
    expect(byTarget.get("first healthy answer ≤ 1 s: PostgreSQL")).toMatchObject({ figure: "500 ms", met: "yes" })
  })

  it("without a floor (a run on PGlite only) the floor's column is '-'", () => {
    const lines = checkTargets(cells({ overheadP50: 0.5, overheadP99: 1, many: 1, hot: 1, pglite: 1 }).filter((c) => !c.target.startsWith("floor")), [], 256)
    expect(lines.every((line) => line.floor === "-")).toBe(true)
  })
})
