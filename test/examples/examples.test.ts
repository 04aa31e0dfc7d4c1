import { execFileSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { expect, it } from "vitest"

const root = join(import.meta.dirname, "..", "..")

it("the embedding example runs and ends with the kill switch holding", () => {
  // "spendgate" resolves to this checkout's sources, not to dist/ (a build).
  const output = execFileSync(process.execPath, ["--conditions=spendgate-source", join(root, "examples/embedded.ts")], {
    cwd: root,
    encoding: "utf8",
    timeout: 60_000
  })
  expect(output).toContain("worker changing its own policy: FORBIDDEN")
  expect(output).toContain("after the kill switch: AGENT_KILLED")
  expect(output.trim().endsWith("ok")).toBe(true)
})

it("every example opens with its file comment (what it shows and how to run it), nothing above it", () => {
  const examples = readdirSync(join(root, "examples")).filter((name) => name.endsWith(".ts"))
  expect(examples.length).toBeGreaterThan(0)
  for (const name of examples) {
    const text = readFileSync(join(root, "examples", name), "utf8")
    expect({ name, opening: text.slice(0, 3) }).toEqual({ name, opening: "/**" })
    expect(text).toMatch(/\n \* Run: (npm run example(?::[\w-]+)?|node examples\/[\w-]+\.ts|npx vitest run examples\/[\w-]+\.test\.ts)\n/)
  }
})
