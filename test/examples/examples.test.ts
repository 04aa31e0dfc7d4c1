import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { expect, it } from "vitest"

const root = join(import.meta.dirname, "..", "..")

it("the embedding example runs and ends with the kill switch holding", () => {
  const output = execFileSync(process.execPath, [join(root, "examples/embedded.ts")], {
    cwd: root,
    encoding: "utf8",
    timeout: 60_000
  })
  expect(output).toContain("worker changing its own policy: FORBIDDEN")
  expect(output).toContain("after the kill switch: AGENT_KILLED")
  expect(output.trim().endsWith("ok")).toBe(true)
})
