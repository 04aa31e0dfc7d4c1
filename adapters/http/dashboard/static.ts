import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { createHash } from "node:crypto"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

/**
 * The dashboard's files: a Preact + htm application with no build step
 * (web/), served by the API's own server, with Preact and htm read from the
 * installed packages. Nothing is loaded from anywhere but this server.
 *
 * - `GET /` and `GET /admin`: the page (the owner area and the operator area
 *   are views of the same application);
 * - `GET /ui/<file>`: the application's modules and stylesheet;
 * - `GET /ui/vendor/{preact,hooks,htm}.mjs`: the libraries, with the hooks
 *   module's bare `preact` import pointed at the served copy.
 *
 * Every file is read once, when the layer is built, and answered from memory.
 */

export const DASHBOARD_PATHS = ["/", "/admin"] as const
export const ASSET_PREFIX = "/ui/"

const WEB_DIR = fileURLToPath(new URL("./web/", import.meta.url))

/** The Content-Security-Policy of every dashboard answer: this origin only. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'"
].join("; ")

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": CONTENT_SECURITY_POLICY,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY"
}

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml"
}

interface Asset {
  readonly path: string
  readonly body: Uint8Array
  readonly contentType: string
  readonly etag: string
}

const asset = (path: string, body: string | Uint8Array): Asset => {
  const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body
  const extension = path.slice(path.lastIndexOf("."))
  return {
    path,
    body: bytes,
    contentType: CONTENT_TYPES[extension] ?? "application/octet-stream",
    etag: `"${createHash("sha256").update(bytes).digest("base64url").slice(0, 22)}"`
  }
}

/** Every file under web/, as `/ui/<relative path>`. */
const applicationFiles = (dir: string, prefix: string): Array<Asset> =>
  readdirSync(dir).sort().flatMap((name) => {
    const full = join(dir, name)
    if (statSync(full).isDirectory()) return applicationFiles(full, `${prefix}${name}/`)
    if (!(name.slice(name.lastIndexOf(".")) in CONTENT_TYPES) || name === "index.html") return []
    return [asset(`${prefix}${name}`, readFileSync(full))]
  })

const vendorFile = (specifier: string): string => readFileSync(fileURLToPath(import.meta.resolve(specifier)), "utf8")

/** Preact, its hooks and htm, from the installed packages. */
const vendorFiles = (): Array<Asset> => [
  asset(`${ASSET_PREFIX}vendor/preact.mjs`, vendorFile("preact")),
  asset(
    `${ASSET_PREFIX}vendor/hooks.mjs`,
    vendorFile("preact/hooks").replace(/from\s*"preact"/g, "from\"./preact.mjs\"")
  ),
  asset(`${ASSET_PREFIX}vendor/htm.mjs`, vendorFile("htm"))
]

const respond = (file: Asset, cache: string) =>
  HttpServerResponse.uint8Array(file.body, {
    contentType: file.contentType,
    headers: { ...SECURITY_HEADERS, "cache-control": cache, etag: file.etag }
  })

/** The dashboard's routes on the server's router. */
export const mountDashboard = () =>
  Layer.effectDiscard(Effect.gen(function*() {
    const router = yield* HttpRouter.HttpRouter
    const page = asset("/index.html", readFileSync(join(WEB_DIR, "index.html")))
    const files = [...applicationFiles(WEB_DIR, ASSET_PREFIX), ...vendorFiles()]
    for (const path of DASHBOARD_PATHS) {
      yield* router.add("GET", path, Effect.succeed(respond(page, "no-cache")))
    }
    for (const file of files) {
      yield* router.add("GET", file.path as HttpRouter.PathInput, (request) =>
        Effect.succeed(
          request.headers["if-none-match"] === file.etag
            ? HttpServerResponse.empty({ status: 304, headers: { etag: file.etag } })
            : respond(file, "no-cache")
        ))
    }
  }))

/** The path templates the dashboard adds, for the access log and the metrics. */
export const dashboardRoutes = (): ReadonlyArray<{ readonly method: string; readonly path: string }> => [
  ...DASHBOARD_PATHS.map((path) => ({ method: "GET", path })),
  ...["", "vendor/", "pages/"].map((folder) => ({ method: "GET", path: `${ASSET_PREFIX}${folder}:file` }))
]
