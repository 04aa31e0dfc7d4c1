import { Clock, Config, Context, Effect, Layer, Option, Redacted } from "effect"
import { check, type InvalidConfig, load } from "../config.ts"
import { HttpIncomingMessage, HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { ByteSize } from "effect"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import { Agents } from "../../src/agents/Agents.ts"
import type { Principal } from "../../src/domain/Agent.ts"
import { hashApiKey, isApiKeyFormat } from "../../src/domain/ids.ts"
import { RateLimiter } from "../../src/ports/RateLimiter.ts"
import { countRateLimited } from "../../src/observability/Metrics.ts"
import { envelopeResponse, type ErrorCode, type Forbidden, toHttpError, type Unauthorized } from "./errors.ts"
import { clientAddress, clientKey, rateLimitedResponse } from "./rateLimit.ts"
import { SECURITY_HEADERS } from "./dashboard/static.ts"

/**
 * Dashboard sessions (docs/dashboard-security.md).
 *
 * `POST /session` exchanges an API key (owner or agent) or the ADMIN_TOKEN
 * for a session cookie, `spendgate_session`: HttpOnly, SameSite=Strict,
 * Path=/, Secure when the request came over TLS (or through a proxy that
 * says `X-Forwarded-Proto: https`). The browser never holds the key.
 *
 * The server keeps sessions in memory, keyed by the SHA-256 of the cookie's
 * value; a session holds the hash of the key it was opened with (the form in
 * which the store keeps keys) or the hash of the admin token, never the key
 * or the token. Every request made with the cookie is authenticated again
 * from that hash, so a killed agent, a rotated or deleted key, or a changed
 * ADMIN_TOKEN is honoured on the next request, exactly as for the key.
 *
 * Lifetimes: a session ends after `idleMinutes` without a request (default
 * 30) and `absoluteHours` after sign-in whatever happens (default 12).
 *
 * CSRF: every request authenticated by the cookie whose method is not GET or
 * HEAD must carry `X-CSRF-Token` equal to the session's token (given only in
 * the JSON of POST/GET /session, which another origin cannot read), and, when
 * the browser sends them, `Origin` equal to this server's origin and
 * `Sec-Fetch-Site` equal to `same-origin` (or `none`: typed or bookmarked); otherwise 403 `CSRF_FAILED`. A
 * request with an `Authorization` (or `X-API-Key`) header is authenticated by
 * that header alone and the cookie is ignored.
 *
 * Sign-in attempts are limited per client address (`signinPer15Minutes`,
 * default 20, GCRA over 15 minutes, counted by the same RateLimiter as the
 * request limits). A key that is malformed, unknown, rotated away or
 * deleted, and a wrong admin token, all get the same 401 answer.
 */

export const SESSION_COOKIE = "spendgate_session"
export const SESSION_PATH = "/session"
export const QR_PATH = "/session/qr.svg"

export interface SessionOptions {
  /** Minutes without a request after which a session ends (default 30). */
  readonly idleMinutes?: number
  /** Hours after sign-in after which a session ends, used or not (default 12). */
  readonly absoluteHours?: number
  /** Sign-in attempts per client address per 15 minutes (default 20). */
  readonly signinPer15Minutes?: number
  /** Reverse proxies in front of the server whose X-Forwarded-For is trusted (TRUST_PROXY). */
  readonly trustProxyHops?: number
  /** Sessions kept at most; the least recently used goes first (default 10,000). */
  readonly maxSessions?: number
  /**
   * Sessions of one credential (key or admin token) kept at most; opening
   * one more ends that credential's least recently used session, never
   * another credential's (default 20).
   */
  readonly maxPerCredential?: number
}

export const DEFAULT_IDLE_MINUTES = 30
export const DEFAULT_ABSOLUTE_HOURS = 12
export const DEFAULT_SIGNIN_PER_15_MINUTES = 20
const FIFTEEN_MINUTES_MS = 15 * 60_000

export type SessionRole = "owner" | "agent" | "operator"

export interface Session {
  readonly role: SessionRole
  /** hashApiKey(key) for owner and agent sessions; SHA-256 hex of the admin token for the operator. */
  readonly credentialHash: string
  readonly csrfToken: string
  readonly createdAtMs: number
  readonly lastSeenAtMs: number
}

export class Sessions extends Context.Service<Sessions, {
  readonly open: (input: { readonly role: SessionRole; readonly credentialHash: string }) => Effect.Effect<{
    readonly cookie: string
    readonly session: Session
  }>
  /** The live session of a cookie value (its idle clock restarted), or None. */
  readonly find: (cookie: string) => Effect.Effect<Option.Option<Session>>
  readonly close: (cookie: string) => Effect.Effect<void>
  readonly idleMs: number
  readonly absoluteMs: number
}>()("spendgate/http/Sessions") {}

const sha256hex = (text: string) => createHash("sha256").update(text).digest("hex")
const sameSecret = (a: string, b: string) =>
  timingSafeEqual(createHash("sha256").update(a).digest(), createHash("sha256").update(b).digest())

const positive = (name: string, value: number | undefined) => {
  if (value !== undefined && (!Number.isFinite(value) || value <= 0)) throw new Error(`${name} must be positive, got ${value}`)
}

export const SessionsLive = (options: SessionOptions = {}): Layer.Layer<Sessions> => {
  positive("idleMinutes", options.idleMinutes)
  positive("absoluteHours", options.absoluteHours)
  positive("maxSessions", options.maxSessions)
  positive("maxPerCredential", options.maxPerCredential)
  const idleMs = (options.idleMinutes ?? DEFAULT_IDLE_MINUTES) * 60_000
  const absoluteMs = (options.absoluteHours ?? DEFAULT_ABSOLUTE_HOURS) * 3_600_000
  const maxSessions = options.maxSessions ?? 10_000
  const maxPerCredential = options.maxPerCredential ?? 20
  return Layer.sync(Sessions, () => {
    // Keyed by SHA-256 of the cookie value; Map order is least recently used first.
    const sessions = new Map<string, Session>()
    const live = (session: Session, now: number) =>
      now - session.lastSeenAtMs < idleMs && now - session.createdAtMs < absoluteMs
    return Sessions.of({
      idleMs,
      absoluteMs,
      open: ({ role, credentialHash }) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          let ofCredential: Array<string> = []
          for (const [id, session] of sessions) {
            if (!live(session, now)) sessions.delete(id)
            else if (session.credentialHash === credentialHash) ofCredential.push(id)
          }
          // One credential signing in again and again ends its own oldest sessions, not others'.
          while (ofCredential.length >= maxPerCredential) {
            sessions.delete(ofCredential[0]!)
            ofCredential = ofCredential.slice(1)
          }
          while (sessions.size >= maxSessions) sessions.delete(sessions.keys().next().value!)
          const cookie = randomBytes(32).toString("base64url")
          const session: Session = {
            role,
            credentialHash,
            csrfToken: randomBytes(32).toString("base64url"),
            createdAtMs: now,
            lastSeenAtMs: now
          }
          sessions.set(sha256hex(cookie), session)
          return { cookie, session }
        }),
      find: (cookie) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const id = sha256hex(cookie)
          const session = sessions.get(id)
          if (session === undefined) return Option.none()
          sessions.delete(id)
          if (!live(session, now)) return Option.none()
          const touched = { ...session, lastSeenAtMs: now }
          sessions.set(id, touched)
          return Option.some(touched)
        }),
      close: (cookie) => Effect.sync(() => void sessions.delete(sha256hex(cookie)))
    })
  })
}

// ---- the request's side ------------------------------------------------------------

const isTls = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const forwarded = (request.headers["x-forwarded-proto"] ?? "").split(",")[0]!.trim().toLowerCase()
  if (forwarded === "https") return true
  const source = request.source as { readonly socket?: { readonly encrypted?: boolean } }
  return source.socket?.encrypted === true
}

/** This server's origin as the browser sees it: scheme and Host. */
export const ownOrigin = (request: HttpServerRequest.HttpServerRequest): string =>
  `${isTls(request) ? "https" : "http"}://${(request.headers["host"] ?? "").toLowerCase()}`

const csrfFailed = (message: string) => toHttpError({ code: "CSRF_FAILED", message }) as Forbidden

/** Origin and Sec-Fetch-Site, when the browser sends them, say the request comes from this origin. */
const sameOriginProblem = (request: HttpServerRequest.HttpServerRequest): string | undefined => {
  const origin = request.headers["origin"]
  if (origin !== undefined && origin.toLowerCase() !== ownOrigin(request)) {
    return "The request comes from another origin"
  }
  const site = request.headers["sec-fetch-site"]
  if (site !== undefined && site !== "same-origin" && site !== "none") return "The request comes from another site"
  return undefined
}

const isSafeMethod = (method: string) => method === "GET" || method === "HEAD"

/** The CSRF checks of a change authenticated by a session cookie. */
export const checkCsrf = (
  request: HttpServerRequest.HttpServerRequest,
  session: Session
): Effect.Effect<void, Forbidden> => {
  if (isSafeMethod(request.method)) return Effect.void
  const problem = sameOriginProblem(request)
  if (problem !== undefined) return Effect.fail(csrfFailed(problem))
  const token = request.headers["x-csrf-token"]
  if (token === undefined || !sameSecret(token, session.csrfToken)) {
    return Effect.fail(csrfFailed("Missing or wrong X-CSRF-Token for this session"))
  }
  return Effect.void
}

/** Whether a request carries credentials of its own (then the cookie is ignored). */
export const hasHeaderCredentials = (request: HttpServerRequest.HttpServerRequest): boolean =>
  request.headers["authorization"] !== undefined || request.headers["x-api-key"] !== undefined

const sessionExpired = () =>
  toHttpError({ code: "UNAUTHORIZED", message: "The session has ended; sign in again" }) as Unauthorized

/**
 * The session of a request that carries no credentials in its headers:
 * None without the cookie; 401 when the cookie names no live session; 403
 * CSRF_FAILED when the request is a change that fails the CSRF checks.
 */
export const cookieSession = (
  sessions: Sessions["Service"],
  request: HttpServerRequest.HttpServerRequest
): Effect.Effect<Option.Option<Session>, Unauthorized | Forbidden> =>
  // A request with a key header (nearly every API call) costs no generator.
  hasHeaderCredentials(request) ? Effect.succeedNone : sessionOfCookie(sessions, request)

const sessionOfCookie = Effect.fnUntraced(function*(
  sessions: Sessions["Service"],
  request: HttpServerRequest.HttpServerRequest
) {
  const cookie = request.cookies[SESSION_COOKIE]
  if (cookie === undefined || cookie === "") return Option.none<Session>()
  const session = yield* sessions.find(cookie)
  if (Option.isNone(session)) return yield* Effect.fail(sessionExpired())
  yield* checkCsrf(request, session.value)
  return session
})

/** The principal of an owner or agent session, from its key's hash, checked as the key would be. */
export const sessionPrincipal = (
  agents: Agents["Service"],
  session: Session
): Effect.Effect<Principal, Unauthorized | Forbidden> =>
  session.role === "operator"
    ? Effect.fail(toHttpError({ code: "UNAUTHORIZED", message: "An operator session has no agent key; sign in with a key" }) as Unauthorized)
    : agents.authenticateKeyHash(session.credentialHash).pipe(
      Effect.mapError((error) => toHttpError(error) as Unauthorized | Forbidden)
    )

/** SHA-256 hex of the admin token: what an operator session holds. */
export const adminCredentialHash = (token: Redacted.Redacted<string>): string => sha256hex(Redacted.value(token))

/** Whether an operator session still matches the configured admin token. */
export const operatorSessionValid = (session: Session, adminToken: Option.Option<Redacted.Redacted<string>>): boolean =>
  session.role === "operator" && Option.isSome(adminToken) &&
  sameSecret(session.credentialHash, adminCredentialHash(adminToken.value))

// ---- the routes -------------------------------------------------------------------

const cookieHeader = (request: HttpServerRequest.HttpServerRequest, value: string, clear = false) =>
  [
    `${SESSION_COOKIE}=${value}`,
    "Path=/",
    "HttpOnly",
    "SameSite=Strict",
    ...(clear ? ["Max-Age=0"] : []),
    ...(isTls(request) ? ["Secure"] : [])
  ].join("; ")

const NO_STORE = { "cache-control": "no-store" }

const fromHttpError = (error: { readonly error: { readonly code: string; readonly message: string; readonly details?: Record<string, unknown> | undefined } }) =>
  envelopeResponse(error.error.code as ErrorCode, error.error.message, error.error.details, NO_STORE)

const invalidCredentials = () =>
  envelopeResponse("UNAUTHORIZED", "Invalid key or token", undefined, NO_STORE)

/** What the dashboard knows of its session: role, CSRF token, a label, and the agent's ids. */
const sessionJson = (
  session: Session,
  principal: Principal | undefined,
  sessions: Sessions["Service"]
) => ({
  role: session.role,
  csrfToken: session.csrfToken,
  label: principal === undefined ? "Operator" : principal.agent.name,
  ...(principal === undefined ? {} : { accountId: principal.agent.accountId, agentId: principal.agent.id }),
  expiresAt: new Date(session.createdAtMs + sessions.absoluteMs).toISOString(),
  idleTimeoutSeconds: Math.round(sessions.idleMs / 1000)
})

const BODY_LIMIT = ByteSize.bytes(4096)

/** The credentials of a sign-in body: `{ key }` or `{ adminToken }`, strings of at most 500 characters. */
const readCredentials = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const text = yield* request.text.pipe(
      Effect.provideService(HttpIncomingMessage.MaxBodySize, BODY_LIMIT),
      Effect.orElseSucceed(() => undefined)
    )
    let body: unknown
    try {
      body = text === undefined ? undefined : JSON.parse(text)
    } catch {
      body = undefined
    }
    const record = typeof body === "object" && body !== null && !Array.isArray(body) ? body as Record<string, unknown> : undefined
    const key = record?.["key"]
    const adminToken = record?.["adminToken"]
    const ok = (value: unknown) => typeof value === "string" && value.length > 0 && value.length <= 500
    if (record !== undefined && ok(key) && adminToken === undefined) return { key: key as string } as const
    if (record !== undefined && ok(adminToken) && key === undefined) return { adminToken: adminToken as string } as const
    return undefined
  })

const validationError = () =>
  envelopeResponse("VALIDATION_ERROR", "Send JSON { \"key\": \"sk_agt_…\" } or { \"adminToken\": \"…\" }", {
    issues: [{ path: [], message: "Expected exactly one of key or adminToken, a non-empty string" }]
  }, NO_STORE)

export interface SessionRouteOptions {
  readonly adminToken: Option.Option<Redacted.Redacted<string>>
  readonly signinPer15Minutes?: number
  readonly trustProxyHops?: number
}

/** POST, GET and DELETE /session, and the QR code image of the funding page. */
export const mountSessionRoutes = (options: SessionRouteOptions) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const router = yield* HttpRouter.HttpRouter
    const sessions = yield* Sessions
    const agents = yield* Agents
    const limiter = yield* RateLimiter
    const signinLimit = options.signinPer15Minutes ?? DEFAULT_SIGNIN_PER_15_MINUTES
    positive("signinPer15Minutes", signinLimit)

    /** The session of the request's cookie, re-authenticated: its JSON, or the refusal. */
    const current = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function*() {
        const cookie = request.cookies[SESSION_COOKIE]
        const found = cookie === undefined || cookie === "" ? Option.none() : yield* sessions.find(cookie)
        if (Option.isNone(found)) return { refusal: fromHttpError(sessionExpired()) } as const
        const session = found.value
        if (session.role === "operator") {
          if (!operatorSessionValid(session, options.adminToken)) {
            yield* sessions.close(cookie!)
            return { refusal: fromHttpError(sessionExpired()) } as const
          }
          return { cookie: cookie!, session, principal: undefined } as const
        }
        const principal = yield* Effect.result(sessionPrincipal(agents, session))
        if (principal._tag === "Failure") {
          // A key that no longer exists ends its sessions; a killed agent's stays, refused, until revived.
          if (principal.failure.error.code === "UNAUTHORIZED") yield* sessions.close(cookie!)
          return { refusal: fromHttpError(principal.failure) } as const
        }
        return { cookie: cookie!, session, principal: principal.success } as const
      })

    yield* router.add("POST", SESSION_PATH, (request) =>
      Effect.gen(function*() {
        const problem = sameOriginProblem(request)
        if (problem !== undefined) return fromHttpError(csrfFailed(problem))
        const address = clientAddress(request, options.trustProxyHops ?? 0)
        const key = clientKey(address) ?? `other:${address.slice(0, 100)}`
        const decision = yield* limiter.take([{ scope: "signin", key, limit: signinLimit, windowMs: FIFTEEN_MINUTES_MS }])
        if (!decision.allowed) {
          yield* countRateLimited("signin")
          return rateLimitedResponse(decision)
        }
        const credentials = yield* readCredentials(request)
        if (credentials === undefined) return validationError()

        let opened: { readonly cookie: string; readonly session: Session }
        let principal: Principal | undefined
        if ("adminToken" in credentials) {
          const token = options.adminToken
          if (Option.isNone(token) || !sameSecret(credentials.adminToken, Redacted.value(token.value))) {
            return invalidCredentials()
          }
          opened = yield* sessions.open({ role: "operator", credentialHash: adminCredentialHash(token.value) })
        } else {
          if (!isApiKeyFormat(credentials.key)) return invalidCredentials()
          const credentialHash = yield* hashApiKey(credentials.key)
          const result = yield* Effect.result(agents.authenticateKeyHash(credentialHash))
          if (result._tag === "Failure") {
            return result.failure._tag === "AgentKilled" ? fromHttpError(toHttpError(result.failure)) : invalidCredentials()
          }
          principal = result.success
          opened = yield* sessions.open({ role: principal.agent.role, credentialHash })
        }
        // A session already open in this browser ends: one browser, one session.
        const previous = request.cookies[SESSION_COOKIE]
        if (previous !== undefined && previous !== "") yield* sessions.close(previous)
        return HttpServerResponse.jsonUnsafe(sessionJson(opened.session, principal, sessions), {
          headers: { ...NO_STORE, "set-cookie": cookieHeader(request, opened.cookie) }
        })
      }))

    yield* router.add("GET", SESSION_PATH, (request) =>
      Effect.gen(function*() {
        const found = yield* current(request)
        if ("refusal" in found) return found.refusal
        return HttpServerResponse.jsonUnsafe(sessionJson(found.session, found.principal, sessions), { headers: NO_STORE })
      }))

    yield* router.add("DELETE", SESSION_PATH, (request) =>
      Effect.gen(function*() {
        const cookie = request.cookies[SESSION_COOKIE]
        const found = cookie === undefined || cookie === "" ? Option.none() : yield* sessions.find(cookie)
        if (Option.isSome(found)) {
          const refused = yield* Effect.flip(checkCsrf(request, found.value)).pipe(Effect.option)
          if (Option.isSome(refused)) return fromHttpError(refused.value)
          yield* sessions.close(cookie!)
        }
        return HttpServerResponse.empty({
          status: 204,
          headers: { ...NO_STORE, "set-cookie": cookieHeader(request, "", true) }
        })
      }))

    yield* router.add("GET", QR_PATH, (request) =>
      Effect.gen(function*() {
        const found = yield* current(request)
        if ("refusal" in found) return found.refusal
        const url = new URL(request.url, "http://localhost")
        const text = url.searchParams.get("text") ?? ""
        // Bytes, not characters: a QR code holds at most 2,331 bytes at this error correction.
        if (text === "" || Buffer.byteLength(text, "utf8") > 2000) {
          return envelopeResponse("VALIDATION_ERROR", "text must be 1 to 2000 bytes (UTF-8)", {
            issues: [{ path: ["text"], message: "Expected 1 to 2000 bytes" }]
          })
        }
        // Loaded on first use: the server starts without it.
        const { default: QRCode } = yield* Effect.promise(() => import("qrcode"))
        const svg = yield* Effect.tryPromise(() => QRCode.toString(text, { type: "svg", errorCorrectionLevel: "M", margin: 2 }))
          .pipe(Effect.option)
        if (Option.isNone(svg)) {
          return envelopeResponse("VALIDATION_ERROR", "text cannot be drawn as a QR code", {
            issues: [{ path: ["text"], message: "Not encodable as a QR code" }]
          })
        }
        return HttpServerResponse.text(svg.value, {
          contentType: "image/svg+xml",
          headers: { ...SECURITY_HEADERS, ...NO_STORE }
        })
      }))
  }))

/** The routes this module adds, for the access log and the metrics. */
export const sessionRoutes = (): ReadonlyArray<{ readonly method: string; readonly path: string }> => [
  { method: "POST", path: SESSION_PATH },
  { method: "GET", path: SESSION_PATH },
  { method: "DELETE", path: SESSION_PATH },
  { method: "GET", path: QR_PATH }
]

// ---- configuration -----------------------------------------------------------------

const positiveInt = (name: string, fallback: number) =>
  Config.Int(name).pipe(check(name, (n) => n >= 1 || "must be at least 1"), Config.withDefault(fallback))

/**
 * `SESSION_IDLE_MINUTES` (default 30), `SESSION_ABSOLUTE_HOURS` (default 12),
 * `SESSION_SIGNIN_PER_15_MINUTES` (default 20 sign-in attempts per client
 * address).
 */
export const loadSessionConfig: Effect.Effect<SessionOptions, InvalidConfig> = load(Config.all({
  idleMinutes: positiveInt("SESSION_IDLE_MINUTES", DEFAULT_IDLE_MINUTES),
  absoluteHours: positiveInt("SESSION_ABSOLUTE_HOURS", DEFAULT_ABSOLUTE_HOURS),
  signinPer15Minutes: positiveInt("SESSION_SIGNIN_PER_15_MINUTES", DEFAULT_SIGNIN_PER_15_MINUTES)
}))

/** One line for the start-up log. */
export const describeSessions = (options: SessionOptions): string =>
  `dashboard sessions end after ${options.idleMinutes ?? DEFAULT_IDLE_MINUTES} min idle or ${
    options.absoluteHours ?? DEFAULT_ABSOLUTE_HOURS
  } h; ${options.signinPer15Minutes ?? DEFAULT_SIGNIN_PER_15_MINUTES} sign-in attempts per 15 min per client address`
