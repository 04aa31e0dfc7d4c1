/**
 * The performance targets of the project (docs/performance.md, "Benchmark"),
 * checked against one `npm run bench:http` run: each target, the figure the
 * run reached, whether it meets it, and what the floor (a bare forwarder that
 * commits one UPDATE a call) reached in the same cell, so that a day on which
 * the machine itself cannot meet a target reads as such.
 *
 * A target is checked only where the run measured its cell ("-" otherwise),
 * and the two over many wallets only when the run used 256 of them, as the
 * targets do.
 */

/** A measured cell, as bench:http keeps it (only what the targets read). */
export interface TargetCell {
  readonly backend: string
  readonly target: string
  readonly connections: number
  readonly wallets: string
  readonly rps: number
  readonly p50: number
  readonly p99: number
  /** The upstream called directly with the same connections, for the overheads. */
  readonly direct?: { readonly p50: number; readonly p99: number } | undefined
}

/** A server's start and memory, as bench:http measures them. */
export interface TargetStart {
  readonly backend: string
  readonly startMs: number
  readonly rssIdleMb: number | undefined
  readonly rssAfterMb: number | undefined
}

export interface TargetLine {
  readonly target: string
  readonly figure: string
  readonly met: "yes" | "no" | "-"
  /** The floor's figure in the same cell ("-" where it has none). */
  readonly floor: string
}

const PROXY = "POST /v1/proxy/openai"
const FLOOR = "floor: forward + 1 commit"
const HOT = "1 (hot)"
/** How many wallets the targets over many wallets are set for. */
export const TARGET_WALLETS = 256

const shown = (value: number | undefined, digits: number) => value === undefined || Number.isNaN(value) ? "-" : value.toFixed(digits)

/** At most `limit` (`atMost`) or at least (`!atMost`): "-" when there is no figure. */
const verdict = (value: number | undefined, limit: number, atMost: boolean): TargetLine["met"] =>
  value === undefined || Number.isNaN(value) ? "-" : (atMost ? value <= limit : value >= limit) ? "yes" : "no"

export const checkTargets = (
  cells: ReadonlyArray<TargetCell>,
  starts: ReadonlyArray<TargetStart>,
  wallets: number
): Array<TargetLine> => {
  const cell = (backend: string, target: string, connections: number, walletsLabel: string) =>
    cells.find((c) => c.backend === backend && c.target === target && c.connections === connections && c.wallets === walletsLabel)
  const floor = (connections: number) => cell("pg", FLOOR, connections, "-")
  const overhead = (c: TargetCell | undefined, which: "p50" | "p99") =>
    c?.direct === undefined ? undefined : c[which] - c.direct[which]
  const many = String(wallets)
  const lines: Array<TargetLine> = []

  for (const [which, limit] of [["p50", 1], ["p99", 5]] as const) {
    for (const [label, walletsLabel] of [["one hot wallet", HOT], [`${many} wallets`, many]] as const) {
      const value = overhead(cell("pg", PROXY, 1, walletsLabel), which)
      const comparable = walletsLabel === HOT || wallets === TARGET_WALLETS
      lines.push({
        target: `overhead ${which} ≤ ${limit} ms: proxy, PostgreSQL, 1 connection, ${label}`,
        figure: value === undefined ? "-" : `${shown(value, 2)} ms`,
        met: comparable ? verdict(value, limit, true) : "-",
        floor: shown(overhead(floor(1), which), 2)
      })
    }
  }
  for (const [limit, label, walletsLabel] of [[2000, `${many} wallets`, many], [1000, "one hot wallet", HOT]] as const) {
    const value = cell("pg", PROXY, 16, walletsLabel)?.rps
    const comparable = walletsLabel === HOT || wallets === TARGET_WALLETS
    lines.push({
      target: `≥ ${limit.toLocaleString("en-US")} calls/s: proxy, PostgreSQL, 16 connections, ${label}`,
      figure: value === undefined ? "-" : `${shown(value, 0)} /s`,
      met: comparable ? verdict(value, limit, false) : "-",
      floor: shown(floor(16)?.rps, 0)
    })
  }
  for (const [label, walletsLabel] of [["one hot wallet", HOT], [`${many} wallets`, many]] as const) {
    const value = cell("pglite", PROXY, 16, walletsLabel)?.rps
    lines.push({
      target: `≥ 400 calls/s: proxy, PGlite, 16 connections, ${label}`,
      figure: value === undefined ? "-" : `${shown(value, 0)} /s`,
      met: verdict(value, 400, false),
      floor: "-"
    })
  }
  const pg = starts.find((s) => s.backend === "pg")
  const pglite = starts.find((s) => s.backend === "pglite")
  lines.push(
    {
      target: "RSS ≤ 150 MB idle: PostgreSQL",
      figure: pg?.rssIdleMb === undefined ? "-" : `${shown(pg.rssIdleMb, 0)} MB`,
      met: verdict(pg?.rssIdleMb, 150, true),
      floor: "-"
    },
    {
      target: "RSS ≤ 200 MB after the run: PostgreSQL",
      figure: pg?.rssAfterMb === undefined ? "-" : `${shown(pg.rssAfterMb, 0)} MB`,
      met: verdict(pg?.rssAfterMb, 200, true),
      floor: "-"
    },
    {
      target: "first healthy answer ≤ 1 s: PostgreSQL",
      figure: pg === undefined ? "-" : `${shown(pg.startMs, 0)} ms`,
      met: verdict(pg?.startMs, 1000, true),
      floor: "-"
    },
    {
      target: "first healthy answer ≤ 2 s: PGlite, fresh data directory",
      figure: pglite === undefined ? "-" : `${shown(pglite.startMs, 0)} ms`,
      met: verdict(pglite?.startMs, 2000, true),
      floor: "-"
    }
  )
  return lines
}
