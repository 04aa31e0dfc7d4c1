import { spawn } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "vitest"

/**
 * No timer of the SQL store outlives it (docs/ledger-recovery.md): a settle
 * the database keeps refusing waits between attempts for a pause that grows
 * to 6.4 s here; closing the store ends that pause, so a process whose store
 * has closed ends at once instead of lingering until the pause runs out.
 * Run in a process of its own (closed-store.child.ts), which must exit by
 * itself: nothing calls process.exit. Before the pause ended with the store,
 * the process lingered about 6 s after closing it; now it ends in tens of
 * milliseconds.
 */

const CHILD = join(import.meta.dirname, "closed-store.child.ts")
/** Refusals before closing: the 14th starts a pause of 6.4 s (50 ms × 2^7, the longest). */
const REFUSALS = 14

describe("a closed SQL store", () => {
  it("keeps no retry pause running: the process ends by itself at once", async () => {
    const child = spawn(process.execPath, [CHILD, String(REFUSALS)], { stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    let closedAt: number | undefined
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      if (closedAt === undefined && /^closed$/m.test(output)) closedAt = Date.now()
    })
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString()
    })
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
    const exitedAt = Date.now()
    expect(code, output).toBe(0)
    expect(output).toContain(`refused ${REFUSALS}`)
    // The settle could not land: the shutdown waited for it, then said so.
    expect(output).toContain("1 settle(s) not confirmed landed after 300 ms")
    expect(closedAt, output).toBeDefined()
    expect(exitedAt - closedAt!).toBeLessThan(2_000)
  }, 60_000)
})
