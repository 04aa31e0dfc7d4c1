import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { capabilityNames } from "../../src/domain/Capability.ts"

const page = (name: string) => readFileSync(new URL(`../../adapters/http/dashboard/web/pages/${name}`, import.meta.url), "utf8")

describe("dashboard files", () => {
  it("the policy editor offers exactly the capabilities the domain knows, in its order", () => {
    const declared = /const CAPABILITIES = (\[[^\]]*\])/.exec(page("agent.js"))
    expect(declared).not.toBeNull()
    expect(JSON.parse(declared![1]!)).toEqual([...capabilityNames])
  })
})
