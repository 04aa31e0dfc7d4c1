import fc from "fast-check"

/**
 * Bad input for every operation of an OpenAPI document: arbitraries built
 * from the published schemas (so that most requests get past the first
 * check and reach deeper code), then spoiled: wrong types, missing and
 * unknown fields, huge and odd numbers, long strings, NUL and control
 * characters, lone surrogates, invalid UTF-8, odd percent-encodings, deep
 * nesting, empty bodies and wrong content types.
 */

export interface Operation {
  readonly method: string
  /** The template, e.g. `/v1/agents/{id}`. */
  readonly path: string
  readonly pathParams: ReadonlyArray<string>
  readonly query: ReadonlyArray<{ readonly name: string; readonly schema: Schema }>
  readonly body: Schema | undefined
  readonly secured: boolean
}

export type Schema = Record<string, any>

export const operationsOf = (doc: any): ReadonlyArray<Operation> => {
  const out: Array<Operation> = []
  for (const [path, ops] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(ops)) {
      const params: ReadonlyArray<any> = op.parameters ?? []
      const fromTemplate = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!)
      out.push({
        method: method.toUpperCase(),
        path,
        pathParams: fromTemplate,
        query: params.filter((p) => p.in === "query").map((p) => ({ name: p.name, schema: p.schema ?? {} })),
        body: op.requestBody?.content?.["application/json"]?.schema,
        secured: (op.security ?? doc.security ?? []).length > 0
      })
    }
  }
  return out
}

// ---- bad scalars -----------------------------------------------------------------

/** Strings that have broken servers before: NUL, controls, surrogates, numbers as text, long text. */
export const nastyStrings: ReadonlyArray<string> = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "\u0001\u0007\u001b[31m\u007f",
  "\r\n",
  "\ud800",
  "x\udfffy",
  "\ud83d",
  "😀",
  "\u202e\ufeff\u200b",
  "%",
  "%00",
  "%zz",
  "%ff",
  "%c0%80",
  "../../etc/passwd",
  "1e15",
  "1e308",
  "1e400",
  "-0",
  "NaN",
  "Infinity",
  "-1",
  "99999999999999999999999999999999",
  "0x10",
  "null",
  "true",
  "[]",
  "{}",
  "'; DROP TABLE agents; --",
  "x".repeat(300),
  "y".repeat(20_000)
]

export const nastyNumbers: ReadonlyArray<number> = [
  0,
  -0,
  -1,
  0.5,
  1e-300,
  1e15,
  1e17,
  1e21,
  1e308,
  -1e308,
  Number.MAX_SAFE_INTEGER,
  Number.MAX_SAFE_INTEGER + 2,
  2 ** 63,
  -(2 ** 63),
  2 ** 64
]

export const nastyString = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...nastyStrings) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 24 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 24 }) }
)

export const nastyScalar: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.constantFrom(...nastyNumbers),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  nastyString
)

/** Any JSON value, small and sometimes nested. */
export const anyJson: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: "small" },
    nastyScalar,
    fc.array(tie("node"), { maxLength: 4 }),
    fc.dictionary(fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom("__proto__", "constructor", "\u0000")), tie("node"), {
      maxKeys: 4
    })
  )
})).node

// ---- schema-driven values ---------------------------------------------------------

const resolve = (doc: any, schema: Schema): Schema => {
  let s = schema
  for (let i = 0; i < 10 && typeof s?.$ref === "string"; i++) {
    const name: string = s.$ref.split("/").pop() ?? ""
    s = doc.components?.schemas?.[name] ?? {}
  }
  return s ?? {}
}

/**
 * A value that fits the schema (mostly), with a chance at every level of
 * being replaced by something that does not.
 */
export const valueFor = (doc: any, schema: Schema, depth = 0, hints: ReadonlyMap<string, ReadonlyArray<string>> = new Map()): fc.Arbitrary<unknown> => {
  const s = resolve(doc, schema)
  const spoil = depth > 4 ? anyJson : fc.oneof(nastyScalar, anyJson)
  const good = goodFor(doc, s, depth, hints)
  return fc.oneof({ weight: 4, arbitrary: good }, { weight: 1, arbitrary: spoil })
}

const goodFor = (doc: any, s: Schema, depth: number, hints: ReadonlyMap<string, ReadonlyArray<string>>): fc.Arbitrary<unknown> => {
  if (Array.isArray(s.anyOf) || Array.isArray(s.oneOf)) {
    const options: ReadonlyArray<Schema> = s.anyOf ?? s.oneOf
    return fc.oneof(...options.map((o) => valueFor(doc, o, depth + 1, hints)))
  }
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as Array<unknown>))
  switch (s.type) {
    case "null":
      return fc.constant(null)
    case "boolean":
      return fc.boolean()
    case "integer":
    case "number":
      return fc.oneof(
        fc.integer({ min: -5, max: 5000 }),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.constantFrom(...nastyNumbers)
      )
    case "string": {
      const max = typeof s.maxLength === "number" ? s.maxLength : 64
      return fc.oneof(
        fc.string({ minLength: s.minLength ?? 0, maxLength: Math.min(max, 40) }),
        fc.string({ minLength: max, maxLength: max + 2 }),
        nastyString
      )
    }
    case "array": {
      const items = s.items === undefined ? anyJson : valueFor(doc, s.items, depth + 1, hints)
      return fc.array(items, { maxLength: Math.min(s.maxItems ?? 4, 4) + (depth === 0 ? 1 : 0) })
    }
    case "object":
    default: {
      if (depth > 5) return anyJson
      const properties: Record<string, Schema> = s.properties ?? {}
      const required = new Set<string>(s.required ?? [])
      const fields = Object.entries(properties).map(([name, prop]) => {
        const hinted = hints.get(name)
        const value = hinted === undefined
          ? valueFor(doc, prop, depth + 1, hints)
          : fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...hinted) }, valueFor(doc, prop, depth + 1, hints))
        // Required fields are sometimes left out, optional ones often.
        return fc.tuple(fc.constant(name), value, fc.integer({ min: 0, max: 9 }).map((n) => required.has(name) ? n > 0 : n > 4))
      })
      const extra = s.additionalProperties !== undefined && s.additionalProperties !== false
        ? fc.dictionary(fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom(...nastyStrings.slice(0, 10))), valueFor(doc, s.additionalProperties === true ? {} : s.additionalProperties, depth + 1, hints), { maxKeys: 3 })
        : fc.dictionary(fc.constantFrom("extra", "__proto__", "constructor", "id", "accountId", "balance"), anyJson, { maxKeys: 2 })
      if (Object.keys(properties).length === 0 && s.additionalProperties === undefined) return anyJson
      return fc.tuple(fc.tuple(...fields), extra, fc.boolean()).map(([entries, more, addExtra]) => {
        const out: Record<string, unknown> = {}
        for (const [name, value, keep] of entries) if (keep) out[name] = value
        if (addExtra) for (const [k, v] of Object.entries(more)) out[k] = v
        return out
      })
    }
  }
}

// ---- encodings ---------------------------------------------------------------------

/** encodeURIComponent that does not throw: a lone surrogate becomes its CESU-8 bytes (invalid UTF-8). */
export const encodeLoosely = (text: string): string => {
  let out = ""
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code >= 0xd800 && code <= 0xdfff) {
      const next = text.charCodeAt(i + 1)
      if (code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        out += encodeURIComponent(text.slice(i, i + 2))
        i++
      } else {
        out += `%${(0xe0 | (code >> 12)).toString(16)}%${(0x80 | ((code >> 6) & 0x3f)).toString(16)}%${(0x80 | (code & 0x3f)).toString(16)}`
      }
    } else {
      out += encodeURIComponent(text[i]!)
    }
  }
  return out
}

/** Raw percent sequences a path or query may carry as they are. */
export const oddPercent = fc.constantFrom("%", "%zz", "%FF", "%00", "%C0%80", "%ED%A0%80", "%2F", "%252F", "%2e%2e", "a%20b", "%E2%82", "+")

/** A path segment or query value: known-good values (hints), nasty text encoded loosely, or raw odd percent-encodings. */
export const segment = (good: ReadonlyArray<string>, schema?: Schema): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: good.length > 0 ? 4 : 0, arbitrary: good.length > 0 ? fc.constantFrom(...good).map(encodeLoosely) : fc.constant("x") },
    { weight: schema?.enum !== undefined ? 2 : 0, arbitrary: fc.constantFrom(...((schema?.enum as Array<string>) ?? ["x"])) },
    // Short enough to stay under Node's 16 KiB request-line limit (a longer one is its own known-defect case).
    { weight: 2, arbitrary: nastyString.filter((text) => text.length <= 1_000).map(encodeLoosely) },
    { weight: 1, arbitrary: fc.constant("z".repeat(4_000)) },
    { weight: 1, arbitrary: oddPercent },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...(good.length > 0 ? good : ["x"])), oddPercent).map(([a, b]) => `${encodeLoosely(a)}${b}`) }
  )

export type RawBody =
  | { readonly kind: "json"; readonly value: unknown }
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "bytes"; readonly bytes: Uint8Array }
  | { readonly kind: "none" }

const deep = (n: number, open: string, close: string) => open.repeat(n) + close.repeat(n)

/** Bodies that are not the JSON a schema describes at all. */
export const rawBody: fc.Arbitrary<RawBody> = fc.oneof(
  fc.constant<RawBody>({ kind: "none" }),
  fc.constantFrom<RawBody>(
    { kind: "text", text: "" },
    { kind: "text", text: "{" },
    { kind: "text", text: "null" },
    { kind: "text", text: "[]" },
    { kind: "text", text: "\"\\u0000\"" },
    { kind: "text", text: "{\"name\":\"\\u0000\"}" },
    { kind: "text", text: "{\"name\":\"\\ud800\"}" },
    { kind: "text", text: "{\"amountUsdCents\":1e400}" },
    { kind: "text", text: "{\"amountSats\":-0}" },
    { kind: "text", text: "{\"a\":1,\"a\":2}" },
    { kind: "text", text: deep(5_000, "[", "]") },
    { kind: "text", text: deep(2_000, "{\"a\":", "}").replace(/}$/, "1}") },
    { kind: "bytes", bytes: Uint8Array.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc0, 0x80, 0x22, 0x7d]) },
    { kind: "bytes", bytes: Uint8Array.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d]) },
    { kind: "bytes", bytes: Uint8Array.from([0x00, 0x00, 0x00]) }
  ),
  fc.string({ unit: "binary", maxLength: 60 }).map<RawBody>((text) => ({ kind: "text", text })),
  fc.uint8Array({ maxLength: 60 }).map<RawBody>((bytes) => ({ kind: "bytes", bytes }))
)

export const contentTypes = fc.constantFrom<string | undefined>(
  "application/json",
  "application/json",
  "application/json",
  "application/json; charset=latin1",
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/octet-stream",
  "application/json\u00ff",
  undefined
)

export const idempotencyKeys = fc.oneof(
  { weight: 3, arbitrary: fc.constant<string | undefined>(undefined) },
  { weight: 2, arbitrary: fc.uuid().map<string | undefined>((u) => u) },
  {
    weight: 2,
    arbitrary: fc.constantFrom<string | undefined>("", " ", "x".repeat(300), "k".repeat(255), "\u00ff\u00fe", "a b", "é", "fixed-key-1", "fixed-key-1")
  }
)
