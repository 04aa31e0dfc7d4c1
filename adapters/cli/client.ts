import { Config, Data, Effect, Option } from "effect"
import { Flag } from "effect/cli"

/**
 * What every client subcommand of `spendgate` shares: where the server is and
 * which credential to send (flags, else the environment), `--json`, one small
 * HTTP client over fetch, and how a failure becomes a message on stderr and
 * an exit code.
 *
 * Exit codes: 0 done; 1 the server answered with a refusal (its error code
 * and message are printed), an invoice expired, or a receipt did not verify;
 * 2 a usage error (a bad or missing flag or argument, no key); 3 the server
 * could not be reached or did not answer with JSON.
 */

export const EXIT_REFUSED = 1
export const EXIT_USAGE = 2
export const EXIT_UNREACHABLE = 3

export const DEFAULT_URL = "http://127.0.0.1:8080"

/** A failure the command line reports as one line on stderr and an exit code. */
export class CliFailure extends Data.TaggedError("CliFailure")<{
  readonly message: string
  readonly exitCode: number
}> {}

export const usage = (message: string) => new CliFailure({ message, exitCode: EXIT_USAGE })

// --- Shared flags -----------------------------------------------------------

export const urlFlag = Flag.String("url").pipe(
  Flag.withDescription(`Base URL of the Spendgate server (else SPENDGATE_URL, else ${DEFAULT_URL})`),
  Flag.withFallbackConfig(Config.String("SPENDGATE_URL")),
  Flag.withDefault(DEFAULT_URL)
)

export const keyFlag = Flag.String("key").pipe(
  Flag.withDescription("API key (sk_agt_…) to send (else SPENDGATE_API_KEY)"),
  Flag.withFallbackConfig(Config.String("SPENDGATE_API_KEY")),
  Flag.optional
)

export const adminTokenFlag = Flag.String("admin-token").pipe(
  Flag.withDescription("The operator's ADMIN_TOKEN (else ADMIN_TOKEN)"),
  Flag.withFallbackConfig(Config.String("ADMIN_TOKEN")),
  Flag.optional
)

export const jsonFlag = Flag.Boolean("json").pipe(
  Flag.withDescription("Print the API's JSON on stdout (one document per line) instead of text"),
  Flag.withDefault(false)
)

/** The flags of a command that talks to the API with a key. */
export const withKey = { url: urlFlag, key: keyFlag, json: jsonFlag }
/** The flags of a command that talks to the admin API. */
export const withAdmin = { url: urlFlag, adminToken: adminTokenFlag, json: jsonFlag }

export interface Connection {
  readonly url: string
  readonly key?: Option.Option<string>
  readonly adminToken?: Option.Option<string>
}

// --- HTTP ---------------------------------------------------------------------

export type Credential = "key" | "admin" | "none"

export interface RequestOptions {
  readonly method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
  readonly auth: Credential
  readonly body?: unknown
  readonly query?: Readonly<Record<string, string | number | undefined>>
  readonly timeoutMs?: number
}

const bearer = (connection: Connection, auth: Credential): Effect.Effect<string | undefined, CliFailure> => {
  if (auth === "none") return Effect.succeed(undefined)
  const found = auth === "key" ? connection.key : connection.adminToken
  if (found === undefined || Option.isNone(found) || found.value === "") {
    return Effect.fail(usage(
      auth === "key"
        ? "no API key: pass --key sk_agt_… or set SPENDGATE_API_KEY"
        : "no admin token: pass --admin-token or set ADMIN_TOKEN"
    ))
  }
  return Effect.succeed(found.value)
}

/** The URL of `path` on the server, with the query's defined values. */
export const endpoint = (
  connection: Connection,
  path: string,
  query: RequestOptions["query"] = {}
): Effect.Effect<URL, CliFailure> =>
  Effect.try({
    try: () => {
      const base = new URL(connection.url)
      if (base.protocol !== "http:" && base.protocol !== "https:") throw new Error("not http(s)")
      const url = new URL(base.pathname.replace(/\/+$/, "") + path, base)
      for (const [name, value] of Object.entries(query)) {
        if (value !== undefined) url.searchParams.set(name, String(value))
      }
      return url
    },
    catch: () => usage(`--url ${JSON.stringify(connection.url)} is not an http:// or https:// URL`)
  })

const describeError = (status: number, body: unknown): string => {
  const error = typeof body === "object" && body !== null && "error" in body
    ? (body as { error: unknown }).error
    : undefined
  if (typeof error === "object" && error !== null) {
    const { code, message, details } = error as { code?: unknown; message?: unknown; details?: unknown }
    const issues = typeof details === "object" && details !== null && Array.isArray((details as { issues?: unknown }).issues)
      ? (details as { issues: ReadonlyArray<{ path?: unknown; message?: unknown }> }).issues
        .map((issue) => `${Array.isArray(issue.path) ? issue.path.join(".") : String(issue.path ?? "")}: ${String(issue.message ?? "")}`)
      : []
    return `${String(code ?? status)}: ${String(message ?? "")}${issues.length > 0 ? ` (${issues.join("; ")})` : ""}`
  }
  return `HTTP ${status}`
}

/**
 * One API call: the parsed JSON body of a 2xx answer, else a CliFailure with
 * the envelope's code and message (exit 1), or exit 3 when the server cannot
 * be reached or answers something other than JSON.
 */
export const request = (
  connection: Connection,
  path: string,
  options: RequestOptions
): Effect.Effect<unknown, CliFailure> =>
  Effect.gen(function*() {
    const token = yield* bearer(connection, options.auth)
    const url = yield* endpoint(connection, path, options.query)
    const headers: Record<string, string> = { accept: "application/json" }
    if (token !== undefined) headers["authorization"] = `Bearer ${token}`
    if (options.body !== undefined) headers["content-type"] = "application/json"
    const answer = yield* Effect.tryPromise({
      try: async (signal) => {
        const response = await fetch(url, {
          method: options.method ?? (options.body === undefined ? "GET" : "POST"),
          headers,
          signal: AbortSignal.any([signal, AbortSignal.timeout(options.timeoutMs ?? 60_000)]),
          ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
        })
        return { status: response.status, text: await response.text() }
      },
      catch: (error) =>
        new CliFailure({
          message: `could not reach ${connection.url}: ${error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error)}`,
          exitCode: EXIT_UNREACHABLE
        })
    })
    let body: unknown
    try {
      body = answer.text === "" ? null : JSON.parse(answer.text)
    } catch {
      return yield* new CliFailure({
        message: `${url.origin} answered HTTP ${answer.status} without JSON: is it a Spendgate server?`,
        exitCode: EXIT_UNREACHABLE
      })
    }
    if (answer.status < 200 || answer.status > 299) {
      return yield* new CliFailure({ message: describeError(answer.status, body), exitCode: EXIT_REFUSED })
    }
    return body
  })

// --- Output -------------------------------------------------------------------

export const out = (text: string): Effect.Effect<void> => Effect.sync(() => void process.stdout.write(`${text}\n`))
export const err = (text: string): Effect.Effect<void> => Effect.sync(() => void process.stderr.write(`${text}\n`))

/** `--json`: the value as one line of JSON; otherwise the readable text. */
export const emit = (json: boolean, value: unknown, text: () => string): Effect.Effect<void> =>
  json ? out(JSON.stringify(value)) : out(text())

/** Columns padded to their widest cell. */
export const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => (row[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ").trimEnd()
  return [line(headers), ...rows.map(line)].join("\n")
}

/** A field of a JSON object as text (`-` when absent or null). */
export const field = (value: unknown, name: string): string => {
  const found = typeof value === "object" && value !== null ? (value as Record<string, unknown>)[name] : undefined
  if (found === undefined || found === null) return "-"
  return typeof found === "string" ? found : JSON.stringify(found)
}

/** Runs a lazily imported implementation, so `--help` and other commands never load it. */
export const lazy = <M, A>(
  load: () => Promise<M>,
  run: (module: M) => Effect.Effect<A, CliFailure>
): Effect.Effect<A, CliFailure> => Effect.flatMap(Effect.promise(load), run)
