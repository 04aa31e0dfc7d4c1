import { describe, expect, it } from "vitest"
import { backoffMs, defaultRetryRule, nextAttemptAt } from "../../src/webhooks/retry.ts"

describe("webhook retry schedule", () => {
  it("doubles from 10 s with jitter between half and all of the delay, capped at 6 h", () => {
    expect(backoffMs(defaultRetryRule, 1, 0)).toBe(5_000)
    expect(backoffMs(defaultRetryRule, 1, 1)).toBe(10_000)
    expect(backoffMs(defaultRetryRule, 2, 1)).toBe(20_000)
    expect(backoffMs(defaultRetryRule, 5, 0.5)).toBe(120_000)
    expect(backoffMs(defaultRetryRule, 40, 1)).toBe(6 * 3_600_000)
    expect(backoffMs(defaultRetryRule, 10_000, 0)).toBe(3 * 3_600_000)
    for (let attempt = 1; attempt < 30; attempt++) {
      const full = Math.min(10_000 * 2 ** (attempt - 1), 6 * 3_600_000)
      const drawn = backoffMs(defaultRetryRule, attempt, Math.random())
      expect(drawn).toBeGreaterThanOrEqual(full / 2)
      expect(drawn).toBeLessThanOrEqual(full)
    }
  })

  it("gives up once the next attempt would fall more than 3 days after the window's start", () => {
    const start = new Date("2026-11-20T00:00:00Z")
    let now = start
    let attempts = 0
    for (;;) {
      attempts++
      const next = nextAttemptAt(defaultRetryRule, attempts, start, now, 1)
      if (next === null) break
      expect(next.getTime() - start.getTime()).toBeLessThanOrEqual(3 * 86_400_000)
      now = next
    }
    // 10 s doubling to 6 h, then every 6 h: about 24 attempts in 3 days.
    expect(attempts).toBeGreaterThan(15)
    expect(attempts).toBeLessThan(40)
    expect(now.getTime() - start.getTime()).toBeGreaterThan(2.5 * 86_400_000)
  })
})
