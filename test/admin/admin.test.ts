import { describe, expect, it } from "vitest"
import { calendarDays, DEFAULT_STATS_DAYS, MS_PER_DAY, pageOf, statsWindow } from "../../src/admin/Admin.ts"

describe("the operator's day arithmetic", () => {
  it("covers UTC calendar days from the first midnight to the midnight after the last day", () => {
    expect(calendarDays("2026-02-27", "2026-03-01")).toEqual({
      from: new Date("2026-02-27T00:00:00.000Z"),
      until: new Date("2026-03-02T00:00:00.000Z")
    })
    expect(calendarDays("2028-02-29", "2028-02-29").until).toEqual(new Date("2028-03-01T00:00:00.000Z"))
    expect(calendarDays("2026-12-31", undefined)).toEqual({ from: new Date("2026-12-31T00:00:00.000Z"), until: undefined })
    expect(calendarDays(undefined, undefined)).toEqual({ from: undefined, until: undefined })
  })

  it("reports the last N whole UTC days, today included, whatever the time of day", () => {
    for (const now of ["2026-11-23T00:00:00.000Z", "2026-11-23T13:45:10.123Z", "2026-11-23T23:59:59.999Z"]) {
      expect(statsWindow(Date.parse(now), 7)).toEqual({
        from: new Date("2026-11-17T00:00:00.000Z"),
        until: new Date("2026-11-24T00:00:00.000Z")
      })
    }
    const window = statsWindow(Date.parse("2026-11-23T08:00:00.000Z"))
    expect(window.until.getTime() - window.from.getTime()).toBe(DEFAULT_STATS_DAYS * MS_PER_DAY)
  })

  it("pages 50 from the start unless asked otherwise", () => {
    expect(pageOf({})).toEqual({ limit: 50, offset: 0 })
    expect(pageOf({ limit: 5, offset: 10 })).toEqual({ limit: 5, offset: 10 })
  })
})
