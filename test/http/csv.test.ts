import { describe, expect, it } from "vitest"
import { csvField, csvRecord } from "../../adapters/http/csv.ts"

describe("CSV fields (RFC 4180, formula cells escaped)", () => {
  it("leaves plain text and numbers as they are", () => {
    expect(csvField("search call")).toBe("search call")
    expect(csvField(0.0375)).toBe("0.0375")
    expect(csvField(1081.25)).toBe("1081.25")
    expect(csvField(null)).toBe("")
    expect(csvField(undefined)).toBe("")
  })

  it("quotes a field holding a comma, a quote or a line break, doubling quotes", () => {
    expect(csvField("a,b")).toBe("\"a,b\"")
    expect(csvField("say \"hi\"")).toBe("\"say \"\"hi\"\"\"")
    expect(csvField("two\nlines")).toBe("\"two\nlines\"")
    expect(csvField("cr\rhere")).toBe("\"cr\rhere\"")
  })

  it("prefixes an apostrophe to a cell a spreadsheet would run as a formula", () => {
    expect(csvField("=1+2")).toBe("'=1+2")
    expect(csvField("+SUM(A1)")).toBe("'+SUM(A1)")
    expect(csvField("-2+3")).toBe("'-2+3")
    expect(csvField("@cmd")).toBe("'@cmd")
    expect(csvField("\tTAB")).toBe("'\tTAB")
    expect(csvField("=HYPERLINK(\"http://x\",\"y\")")).toBe("\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"")
    expect(csvField("a=b")).toBe("a=b")
  })

  it("ends a record with CRLF", () => {
    expect(csvRecord(["id", 1, null, "x,y"])).toBe("id,1,,\"x,y\"\r\n")
  })
})
