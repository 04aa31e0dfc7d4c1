import { describe, expect, it } from "vitest"
import { loadOnceUnlessFailed } from "../../adapters/lazyLoad.ts"

/** The lazy loads of optional SDKs (Stripe, MCP): loaded once when they succeed, tried again when they fail. */

describe("loadOnceUnlessFailed", () => {
  it("a success is loaded once and shared, by concurrent and later calls alike", async () => {
    let calls = 0
    const load = loadOnceUnlessFailed(async () => ({ n: ++calls }))
    const [a, b] = await Promise.all([load(), load()])
    expect(a).toBe(b)
    expect(await load()).toBe(a)
    expect(calls).toBe(1)
  })

  it("a failure reaches the calls that waited on it, and the next call loads again", async () => {
    let calls = 0
    const load = loadOnceUnlessFailed(() => {
      calls += 1
      return calls === 1 ? Promise.reject(new Error("import failed")) : Promise.resolve("loaded")
    })
    const waiting = [load(), load()]
    await expect(waiting[0]).rejects.toThrow("import failed")
    await expect(waiting[1]).rejects.toThrow("import failed")
    expect(calls).toBe(1)
    expect(await load()).toBe("loaded")
    expect(await load()).toBe("loaded")
    expect(calls).toBe(2)
  })

  it("a load that throws before returning a promise fails the call, and is tried again", async () => {
    let calls = 0
    const load = loadOnceUnlessFailed((): Promise<string> => {
      calls += 1
      if (calls === 1) throw new Error("thrown")
      return Promise.resolve("loaded")
    })
    await expect(load()).rejects.toThrow("thrown")
    expect(await load()).toBe("loaded")
  })
})
