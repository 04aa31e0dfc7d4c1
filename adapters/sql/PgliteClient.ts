/**
 * `SqlClient` over embedded PGlite (PostgreSQL compiled to WebAssembly).
 *
 * The client is built to be interchangeable with `@effect/sql-pg`: statements
 * are compiled by the same PostgreSQL compiler (`$1` placeholders, identifiers
 * quoted with `"`), parameters are typed the way `@effect/sql-pg` types them,
 * and result values come back as the same JavaScript types. Code written
 * against `SqlClient` therefore runs unchanged on either driver.
 *
 * Value mapping. `@effect/sql-pg` 4.x decodes PostgreSQL's binary wire
 * format; PGlite returns text, which is parsed here into the same values:
 *
 * - int2, int4, oid: number
 * - int8 (also `count(*)`, `sum(int4)`): bigint, whatever the magnitude
 * - float4, float8: number (float4 rounded to single precision, as in binary)
 * - numeric (also `sum(int8)`, `avg(...)`): string, exactly as printed
 * - bool: boolean
 * - text, varchar, char, name, uuid, inet, enums and other types: string
 * - timestamptz, timestamp: Date, truncated to milliseconds toward
 *   2000-01-01; a `timestamp`'s wall-clock fields become the Date's UTC
 *   fields; ±infinity becomes an invalid Date
 * - date: string `YYYY-MM-DD` (astronomical year numbering before 1 AD)
 * - time: bigint microseconds since midnight
 * - timetz: string `HH:MM:SS[.ffffff]±HH:MM`
 * - interval: `{ months, days, microseconds: bigint }`
 * - json, jsonb: parsed JSON
 * - bytea: Uint8Array
 * - one-dimensional arrays: arrays of the element mapping
 *
 * The text parsers assume PostgreSQL's default `DateStyle` (ISO) and
 * `IntervalStyle` (postgres); a session that changes them gets raw strings or
 * parse failures for those types.
 *
 * Concurrency: PGlite is a single backend with a single session, guarded by a
 * one-permit semaphore. A statement outside a transaction holds the permit
 * while it runs; a transaction holds it from `BEGIN` to `COMMIT`/`ROLLBACK`,
 * so statements from other fibers wait for it instead of running inside it.
 * Nested `withTransaction` calls become savepoints, as with the other drivers.
 *
 * @since 0.1.0
 */
import { PGlite } from "@electric-sql/pglite"
import type { ParserOptions, Results } from "@electric-sql/pglite"
import { PgClient, PgTypes } from "@effect/sql-pg"
import { Config, Context, Effect, Layer, Predicate, Scope, Semaphore, Stream } from "effect"
import { identity } from "effect/Function"
import { Reactivity } from "effect/reactivity"
import { SqlClient, SqlConnection, SqlError, Statement } from "effect/sql"
import { mkdir } from "node:fs/promises"
import * as DataDirLock from "./dataDirLock.ts"
import { clearFailedStart, isNewDataDir, loadTemplate } from "./pgliteTemplate.ts"
import { PgliteClient } from "./pgliteService.ts"

// -----------------------------------------------------------------------------
// Configuration and services
// -----------------------------------------------------------------------------

/**
 * Options for {@link make} and {@link layer}.
 *
 * @since 0.1.0
 */
export interface PgliteClientConfig {
  /**
   * Whether a new database opens from the template made at install
   * (pgliteTemplate.ts), already migrated; default true. `spendgate migrate`
   * opens without it, so that it applies, and reports, every migration itself.
   */
  readonly template?: boolean | undefined
  /**
   * Directory holding the database files. Created if missing. When
   * undefined, the database lives in memory and is lost when the client's
   * scope closes. A directory is held by one process at a time (see
   * dataDirLock.ts): opening one that another live process holds fails with
   * `DataDirInUse` before anything in it is read or written.
   */
  readonly dataDir?: string | undefined
  /** Extra attributes recorded on every SQL span. */
  readonly spanAttributes?: Record<string, unknown> | undefined
  /** Applied to column names in result rows, e.g. `snake_case` to `camelCase`. */
  readonly transformResultNames?: ((str: string) => string) | undefined
  /** Applied to identifiers written with `sql(name)` / `sql.insert`, e.g. `camelCase` to `snake_case`. */
  readonly transformQueryNames?: ((str: string) => string) | undefined
  /** Whether the name transforms also apply inside JSON values. Defaults to `true`. */
  readonly transformJson?: boolean | undefined
}

/**
 * The raw PGlite instance behind the layer's `SqlClient` (defined in
 * pgliteService.ts, which loads nothing of PGlite).
 *
 * @since 0.1.0
 */
export { PgliteClient }

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

const OID = PgTypes.OID

interface Instance {
  readonly pglite: PGlite
  readonly client: SqlClient.SqlClient
}

const makeInstance = Effect.fnUntraced(function*(options: PgliteClientConfig) {
  const dataDir = options.dataDir
  if (dataDir !== undefined) {
    // First, so that it is released last: after PGlite has closed its files.
    yield* DataDirLock.scoped(dataDir)
    yield* Effect.tryPromise({
      try: () => mkdir(dataDir, { recursive: true }),
      catch: (cause) => connectionError(cause, `PgliteClient: cannot create data directory ${dataDir}`, "connect")
    })
  }

  // A new database starts from the template made at install (pgliteTemplate.ts) when there is one.
  const template = options.template !== false && (dataDir === undefined || isNewDataDir(dataDir))
    ? yield* Effect.promise(() => loadTemplate())
    : undefined
  const pglite = yield* Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const plain = () => PGlite.create({ ...(dataDir === undefined ? {} : { dataDir }), parsers: resultParsers })
        if (template === undefined) return plain()
        try {
          return await PGlite.create({ ...(dataDir === undefined ? {} : { dataDir }), loadDataDir: template, parsers: resultParsers })
        } catch {
          // A template that does not open (damaged, or of another build): the directory held no
          // database before, so what the attempt left is removed and initdb makes it as before.
          if (dataDir !== undefined) await clearFailedStart(dataDir, [DataDirLock.LOCK_FILE])
          return plain()
        }
      },
      catch: (cause) => connectionError(cause, "PgliteClient: failed to open the database", "connect")
    }),
    (db) =>
      Effect.tryPromise(() => db.close()).pipe(
        Effect.ignore({ log: "Warn", message: "PgliteClient: failed to close the database" })
      )
  )

  // One permit: the single PGlite session. Outside a transaction every call
  // takes it for the duration of that call. A transaction (and `reserve`)
  // leases it until its scope closes, and its statements use the connection
  // without asking again. Streams are read in full before they emit, so they
  // never hold the session while the consumer runs other statements.
  const session = yield* Semaphore.make(1)
  const shared = makeConnection(pglite, (effect) => session.withPermit(effect))
  const leased = makeConnection(pglite, identity)
  const lease = Effect.as(session.takeScoped(1), leased)

  const transformRows = options.transformResultNames
    ? Statement.defaultTransforms(options.transformResultNames, options.transformJson).array
    : undefined

  const client = yield* SqlClient.make({
    driver: "pglite",
    acquirer: Effect.succeed(shared),
    borrower: (f) => f(shared),
    transactionAcquirer: lease,
    compiler: PgClient.makeCompiler(options.transformQueryNames, options.transformJson),
    releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
    commit,
    spanAttributes: [
      ...(options.spanAttributes ? Object.entries(options.spanAttributes) : []),
      ["db.system.name", "postgresql"],
      ["db.namespace", dataDir ?? "memory"]
    ],
    transformRows
  })

  return { pglite, client } satisfies Instance
})

/**
 * Why a database could not be opened: its directory is held by another
 * process, cannot be locked, or PGlite failed.
 *
 * @since 0.1.0
 */
export type OpenError = SqlError.SqlError | DataDirLock.DataDirInUse | DataDirLock.DataDirLockFailed

/**
 * Opens a PGlite database and builds a `SqlClient` over it. The database is
 * closed when the surrounding scope closes.
 *
 * @since 0.1.0
 */
export const make = (
  options: PgliteClientConfig
): Effect.Effect<SqlClient.SqlClient, OpenError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.map(makeInstance(options), (instance) => instance.client)

/**
 * Provides `SqlClient` and {@link PgliteClient}.
 *
 * @since 0.1.0
 */
export const layer = (
  options: PgliteClientConfig
): Layer.Layer<SqlClient.SqlClient | PgliteClient, OpenError> =>
  Layer.effectContext(
    Effect.map(makeInstance(options), ({ client, pglite }) =>
      Context.make(PgliteClient, PgliteClient.of({ pglite, dataDir: options.dataDir })).pipe(
        Context.add(SqlClient.SqlClient, client)
      ))
  ).pipe(Layer.provide(Reactivity.layer))

/**
 * {@link layer} with its options read from configuration, e.g.
 * `layerConfig({ dataDir: Config.String("DATA_DIR").pipe(Config.withDefault(undefined)) })`.
 *
 * @since 0.1.0
 */
export const layerConfig = (
  config: Config.Wrap<PgliteClientConfig>
): Layer.Layer<SqlClient.SqlClient | PgliteClient, Config.ConfigError | OpenError> =>
  Layer.unwrap(Effect.map(Config.unwrap(config), layer))

// -----------------------------------------------------------------------------
// Connection
// -----------------------------------------------------------------------------

type Transform = (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined

const makeConnection = (
  db: PGlite,
  guard: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
): SqlConnection.Connection => {
  const run = (
    sql: string,
    params: ReadonlyArray<unknown>,
    rowMode: "object" | "array"
  ): Effect.Effect<Results<SqlConnection.Row>, SqlError.SqlError> =>
    Effect.suspend(() => {
      const bound = bindParameters(params)
      if (bound instanceof SqlError.SqlError) return Effect.fail(bound)
      // PGlite cannot cancel a statement once it has started, so the call
      // runs to completion and a permit is given back only when the session
      // is free again.
      return guard(Effect.uninterruptible(Effect.tryPromise({
        try: () => db.query<SqlConnection.Row>(sql, bound.values, { paramTypes: bound.types, rowMode }),
        catch: (cause) => queryError(cause, db)
      })))
    })

  // Row objects are built by PGlite with the column names as-is.
  const rows = (sql: string, params: ReadonlyArray<unknown>, transformRows: Transform) =>
    Effect.map(run(sql, params, "object"), (result) => transformRows ? transformRows(result.rows) : result.rows)

  // PGlite's result type does not follow `rowMode`; in array mode each row is an array of values.
  const values = (sql: string, params: ReadonlyArray<unknown>) =>
    Effect.map(run(sql, params, "array"), (result) => result.rows as unknown as ReadonlyArray<ReadonlyArray<unknown>>)

  return {
    execute: rows,
    // PGlite runs every statement through the unnamed prepared statement, so
    // "unprepared" is the same call; like PostgreSQL's extended protocol it
    // accepts one statement per call.
    executeUnprepared: rows,
    executeRaw: (sql, params) => run(sql, params, "object"),
    executeValues: values,
    executeValuesUnprepared: values,
    // The result is materialised first; PGlite is in-process, so a cursor
    // would save memory but no round trips.
    executeStream: (sql, params, transformRows) =>
      Stream.unwrap(Effect.map(rows(sql, params, transformRows), (result) => Stream.fromArray(result)))
  }
}

/** PostgreSQL answers `COMMIT` of an aborted transaction with `ROLLBACK` instead of an error. */
const commit = (conn: SqlConnection.Connection): Effect.Effect<void, SqlError.SqlError> =>
  Effect.flatMap(conn.executeRaw("COMMIT", []), (result) =>
    Predicate.hasProperty(result, "command") && result.command === "ROLLBACK"
      ? Effect.fail(
        new SqlError.SqlError({
          reason: new SqlError.UnknownError({
            cause: new Error("COMMIT rolled back an aborted transaction"),
            message: "PgliteClient: COMMIT rolled back an aborted transaction",
            operation: "commit"
          })
        })
      )
      : Effect.void)

// -----------------------------------------------------------------------------
// Parameters
// -----------------------------------------------------------------------------

interface BoundParameters {
  readonly values: Array<unknown>
  readonly types: Array<number>
}

const INT32_MIN = -2147483648
const INT32_MAX = 2147483647

/**
 * Chooses the parameter type the way `@effect/sql-pg` does, so that the
 * server resolves operators and result types identically on both drivers
 * (`SELECT ${1}` is an int4 on both, not text on one of them). Type 0 leaves
 * the type to the server, as for strings. Values are handed to PGlite's
 * serialisers for the chosen type.
 */
const bindScalar = (value: unknown): readonly [oid: number, value: unknown] => {
  if (PgTypes.isParameter(value)) return bindTyped(value.oid, value.value)
  if (value === null || value === undefined) return [0, null]
  switch (typeof value) {
    case "boolean":
      return [OID.bool, value]
    case "bigint":
      return [OID.int8, value]
    case "number":
      if (Number.isInteger(value)) {
        if (value >= INT32_MIN && value <= INT32_MAX) return [OID.int4, value]
        if (Number.isSafeInteger(value)) return [OID.int8, value]
      }
      return [OID.float8, value]
    case "string":
      return [0, value]
  }
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new TypeError("Cannot bind an invalid Date")
    return [OID.timestamptz, value]
  }
  if (value instanceof Uint8Array) return [OID.bytea, value]
  if (value instanceof Int8Array) return [OID.bytea, new Uint8Array(value.buffer, value.byteOffset, value.byteLength)]
  throw new TypeError(`Cannot infer a PostgreSQL type for ${String(value)}`)
}

/** Explicitly typed parameters, such as `PgClient.json`'s jsonb. */
const bindTyped = (oid: number, value: unknown): readonly [oid: number, value: unknown] => {
  if (value === null || value === undefined) return [oid, null]
  switch (oid) {
    case OID.json:
    case OID.jsonb: {
      // PGlite would pass a string through unquoted; encode it as JSON text.
      const text = JSON.stringify(value)
      if (text === undefined) throw new TypeError("Value cannot be serialised as JSON")
      return [oid, text]
    }
    case OID.time:
      return typeof value === "bigint" ? [oid, formatTimeOfDay(value)] : [oid, value]
    case OID.interval:
      return isInterval(value)
        ? [oid, `${value.months} mons ${value.days} days ${value.microseconds} microseconds`]
        : [oid, value]
    default:
      return [oid, value]
  }
}

const bindParameter = (value: unknown): readonly [oid: number, value: unknown] => {
  if (!Array.isArray(value)) return bindScalar(value)
  // An empty array is left to the server to type, as a text literal.
  if (value.length === 0) return [0, "{}"]
  let elementOid: number | undefined
  const elements: Array<unknown> = []
  for (const element of value) {
    if (Array.isArray(element)) throw new TypeError("Nested array parameters are not supported")
    const [oid, bound] = bindScalar(element)
    if (bound === null) {
      elements.push(null)
      continue
    }
    const typed = oid === 0 ? OID.text : oid
    if (elementOid === undefined) elementOid = typed
    else if (elementOid !== typed) throw new TypeError("Array parameter elements must have the same type")
    elements.push(bound)
  }
  if (elementOid === undefined) throw new TypeError("Cannot infer the type of an array containing only nulls")
  const arrayOid = PgTypes.arrayOidFor(elementOid)
  if (arrayOid === undefined) throw new TypeError(`No array type known for element type ${elementOid}`)
  return [arrayOid, elements]
}

const bindParameters = (params: ReadonlyArray<unknown>): BoundParameters | SqlError.SqlError => {
  const values: Array<unknown> = []
  const types: Array<number> = []
  try {
    for (const param of params) {
      const [oid, value] = bindParameter(param)
      types.push(oid)
      values.push(value)
    }
  } catch (cause) {
    return new SqlError.SqlError({
      reason: new SqlError.UnknownError({
        cause,
        message: `PgliteClient: ${cause instanceof Error ? cause.message : "cannot bind parameters"}`,
        operation: "bind"
      })
    })
  }
  return { values, types }
}

const isInterval = (u: unknown): u is PgTypes.Interval =>
  Predicate.hasProperty(u, "months") && Predicate.hasProperty(u, "days") &&
  Predicate.hasProperty(u, "microseconds") && typeof u.microseconds === "bigint"

const formatTimeOfDay = (micros: bigint): string => {
  const totalSeconds = Number(micros / 1_000_000n)
  const fraction = Number(micros % 1_000_000n)
  const pad2 = (n: number) => String(n).padStart(2, "0")
  const base = `${pad2(Math.floor(totalSeconds / 3600))}:${pad2(Math.floor(totalSeconds / 60) % 60)}:${pad2(totalSeconds % 60)}`
  return fraction === 0 ? base : `${base}.${String(fraction).padStart(6, "0")}`
}

// -----------------------------------------------------------------------------
// Result values
// -----------------------------------------------------------------------------

const PG_EPOCH_MS = Date.UTC(2000, 0, 1)

const timestampPattern =
  /^(\d{4,})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(?:([+-])(\d{2})(?::(\d{2}))?(?::(\d{2}))?)?( BC)?$/

/**
 * Parses PostgreSQL's ISO text output of `timestamp`/`timestamptz`. Like
 * `@effect/sql-pg`, sub-millisecond digits are truncated toward the
 * PostgreSQL epoch (2000-01-01), and infinities become an invalid Date.
 */
const parseTimestamp = (text: string): Date => {
  const match = timestampPattern.exec(text)
  if (match === null) return new Date(Number.NaN)
  const [, y, mo, d, h, mi, s, fraction, sign, zh, zm, zs, bc] = match
  const micros = fraction === undefined ? 0 : Number(fraction.padEnd(6, "0"))
  const date = new Date(0)
  const year = bc === undefined ? Number(y) : 1 - Number(y)
  date.setUTCFullYear(year, Number(mo) - 1, Number(d))
  date.setUTCHours(Number(h), Number(mi), Number(s), Math.floor(micros / 1000))
  let time = date.getTime()
  if (sign !== undefined) {
    const offsetSeconds = Number(zh) * 3600 + Number(zm ?? 0) * 60 + Number(zs ?? 0)
    time -= (sign === "-" ? -offsetSeconds : offsetSeconds) * 1000
  }
  if (micros % 1000 !== 0 && time < PG_EPOCH_MS) time += 1
  return new Date(time)
}

const bcDatePattern = /^(\d{4,})-(\d{2}-\d{2}) BC$/

/** `date` as `YYYY-MM-DD`, with BC dates as astronomical years (1 BC is `0000`, 2 BC is `-0001`). */
const parseDate = (text: string): string => {
  const match = bcDatePattern.exec(text)
  if (match === null) return text
  const year = 1 - Number(match[1])
  const yearText = year < 0 ? `-${String(-year).padStart(4, "0")}` : String(year).padStart(4, "0")
  return `${yearText}-${match[2]}`
}

const timePattern = /^(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$/

/** `time` as microseconds since midnight. */
const parseTime = (text: string): bigint | string => {
  const match = timePattern.exec(text)
  if (match === null) return text
  const [, h, m, s, fraction] = match
  const seconds = Number(h) * 3600 + Number(m) * 60 + Number(s)
  return BigInt(seconds * 1_000_000 + (fraction === undefined ? 0 : Number(fraction.padEnd(6, "0"))))
}

const timetzPattern = /^(\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)([+-])(\d{2})(?::(\d{2}))?(?::\d{2})?$/

/** `timetz` with the zone always written as `±HH:MM`. */
const parseTimetz = (text: string): string => {
  const match = timetzPattern.exec(text)
  if (match === null) return text
  const [, time, sign, hours, minutes] = match
  return `${time}${sign}${hours}:${minutes ?? "00"}`
}

const intervalPattern = /([+-]?\d+) (year|mon|day)s?|([+-])?(\d+):(\d{2}):(\d{2})(?:\.(\d{1,6}))?/g

/** `interval` in the `postgres` IntervalStyle, e.g. `1 year 2 mons -3 days +04:05:06.789`. */
const parseInterval = (text: string): PgTypes.Interval => {
  let months = 0
  let days = 0
  let microseconds = 0n
  for (const match of text.matchAll(intervalPattern)) {
    const [, amount, unit, sign, h, m, s, fraction] = match
    if (unit !== undefined) {
      const n = Number(amount)
      if (unit === "year") months += n * 12
      else if (unit === "mon") months += n
      else days += n
    } else {
      const magnitude = (BigInt(h!) * 3600n + BigInt(m!) * 60n + BigInt(s!)) * 1_000_000n +
        BigInt(fraction === undefined ? 0 : Number(fraction.padEnd(6, "0")))
      microseconds += sign === "-" ? -magnitude : magnitude
    }
  }
  return { months, days, microseconds }
}

/**
 * Installed on the PGlite instance rather than per query, so that PGlite's
 * array parsers, which look up the element parser on the instance, decode
 * array elements the same way.
 */
const resultParsers: ParserOptions = {
  [OID.int8]: (text) => BigInt(text),
  [OID.float4]: (text) => Math.fround(Number(text)),
  [OID.date]: parseDate,
  [OID.time]: parseTime,
  [OID.timetz]: parseTimetz,
  [OID.timestamp]: parseTimestamp,
  [OID.timestamptz]: parseTimestamp,
  [OID.interval]: parseInterval
}

// -----------------------------------------------------------------------------
// Errors
// -----------------------------------------------------------------------------

/** Fields of a PostgreSQL ErrorResponse, as both PGlite and `@effect/sql-pg` expose them. */
const errorFields = [
  "severity",
  "code",
  "detail",
  "hint",
  "position",
  "internalPosition",
  "internalQuery",
  "where",
  "schema",
  "table",
  "column",
  "dataType",
  "constraint",
  "file",
  "line",
  "routine"
] as const

/**
 * The SQLSTATE code (e.g. `"23505"` unique violation, `"23514"` check
 * violation) of a `SqlError` raised by this client or by `@effect/sql-pg`,
 * found at `error.reason.cause.code`.
 *
 * @since 0.1.0
 */
export const sqlState = (error: unknown): string | undefined => {
  const cause = SqlError.isSqlError(error) ? error.reason.cause : error
  return Predicate.hasProperty(cause, "code") && typeof cause.code === "string" ? cause.code : undefined
}

const connectionError = (cause: unknown, message: string, operation: string) =>
  new SqlError.SqlError({ reason: new SqlError.ConnectionError({ cause, message, operation }) })

/**
 * Wraps a failed statement. The cause is an `Error` carrying the server's
 * error fields (`code`, `constraint`, `detail`, ...), the same shape
 * `@effect/sql-pg` produces; the statement's parameters are left out so they
 * do not end up in logs.
 */
const queryError = (error: unknown, db: PGlite): SqlError.SqlError => {
  const code = Predicate.hasProperty(error, "code") && typeof error.code === "string" ? error.code : undefined
  if (code === undefined) {
    return db.closed
      ? connectionError(error, "PgliteClient: the database is closed", "query")
      : new SqlError.SqlError({
        reason: new SqlError.UnknownError({ cause: error, message: "PgliteClient: Query failed", operation: "query" })
      })
  }
  const fields: Record<string, unknown> = {}
  for (const field of errorFields) {
    if (Predicate.hasProperty(error, field) && error[field] !== undefined) fields[field] = error[field]
  }
  const cause = Object.assign(new Error(error instanceof Error ? error.message : "Unknown PostgreSQL error"), fields)
  return new SqlError.SqlError({ reason: classify(code, cause, "PgliteClient: Query failed") })
}

/** Maps a SQLSTATE to the `SqlError` reasons, by class as `@effect/sql-pg` does. */
const classify = (code: string, cause: Error & Record<string, unknown>, message: string): SqlError.SqlErrorReason => {
  const props = { cause, message, operation: "query" }
  switch (code) {
    case "23505": {
      const constraint = typeof cause.constraint === "string" && cause.constraint.trim() !== ""
        ? cause.constraint.trim()
        : "unknown"
      return new SqlError.UniqueViolation({ ...props, constraint })
    }
    case "42501":
      return new SqlError.AuthorizationError(props)
    case "40P01":
      return new SqlError.DeadlockError(props)
    case "40001":
      return new SqlError.SerializationError(props)
    case "55P03":
      return new SqlError.LockTimeoutError(props)
    case "57014":
      return new SqlError.StatementTimeoutError(props)
  }
  switch (code.slice(0, 2)) {
    case "08":
      return new SqlError.ConnectionError(props)
    case "28":
      return new SqlError.AuthenticationError(props)
    case "42":
      return new SqlError.SqlSyntaxError(props)
    case "23":
      return new SqlError.ConstraintError(props)
  }
  return new SqlError.UnknownError(props)
}
