import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { expect, it } from "vitest"

const root = join(import.meta.dirname, "..", "..")

it("the paid-call example meters an agent's own upstream: settled at usage, released on failure, refused over the cap", () => {
  // "spendgate" resolves to this checkout's sources, not to dist/ (a build).
  const output = execFileSync(process.execPath, ["--conditions=spendgate-source", join(root, "examples/paid-call.ts")], {
    cwd: root,
    encoding: "utf8",
    timeout: 60_000
  })
  expect(output).toContain("charged 450 µUSD of 2500 quoted; balance 99550 µUSD")
  expect(output).toContain("upstream failure: UpstreamFailed; balance 99550 -> 99550 µUSD")
  expect(output).toContain("over the per-call cap: PER_CALL_LIMIT_EXCEEDED; upstream called 0 time(s)")
  expect(output.trim().endsWith("ok")).toBe(true)
})
