import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { checkCaveats, termsCaveats } from "../../src/l402/caveats.ts"

const NOW = 1_800_000_000_000
const terms = { capability: "speak", maxPriceMicroUsd: 500n, validUntilSeconds: NOW / 1000 + 60, calls: 2 }

const codeOf = (caveats: ReadonlyArray<string>, capability = "speak", nowMs = NOW) => {
  const result = checkCaveats(caveats, { capability, nowMs })
  return Result.isSuccess(result) ? "ok" : result.failure.code
}

describe("L402 caveats", () => {
  it("grant exactly the terms they were minted with", () => {
    expect(checkCaveats(termsCaveats(terms), { capability: "speak", nowMs: NOW })).toEqual(Result.succeed(terms))
  })

  it("refuse another capability, and a token past valid_until", () => {
    expect(codeOf(termsCaveats(terms), "reason")).toBe("L402_WRONG_CAPABILITY")
    expect(codeOf(termsCaveats(terms), "speak", NOW + 60_000)).toBe("L402_TOKEN_EXPIRED")
    expect(codeOf(termsCaveats(terms), "speak", NOW + 59_999)).toBe("ok")
  })

  it("only narrow when repeated: the strictest value wins", () => {
    const narrowed = [...termsCaveats(terms), "calls=1", "max_price_micro_usd=900", `valid_until=${NOW / 1000 + 10}`]
    expect(checkCaveats(narrowed, { capability: "speak", nowMs: NOW })).toEqual(
      Result.succeed({ ...terms, calls: 1, validUntilSeconds: NOW / 1000 + 10 })
    )
    expect(codeOf([...termsCaveats(terms), "capability=reason"])).toBe("L402_TOKEN_INVALID")
  })

  it("fail closed on unknown, malformed or missing caveats", () => {
    expect(codeOf([...termsCaveats(terms), "ip=1.2.3.4"])).toBe("L402_TOKEN_INVALID")
    expect(codeOf([...termsCaveats(terms), "calls=0"])).toBe("L402_TOKEN_INVALID")
    expect(codeOf([...termsCaveats(terms), "max_price_micro_usd=-1"])).toBe("L402_TOKEN_INVALID")
    expect(codeOf(termsCaveats(terms).slice(1))).toBe("L402_TOKEN_INVALID")
    expect(codeOf([])).toBe("L402_TOKEN_INVALID")
  })
})
