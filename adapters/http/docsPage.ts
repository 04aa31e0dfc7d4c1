import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { OpenApi } from "effect/http-api"
import { readFile } from "node:fs/promises"
import { loadOnceUnlessFailed } from "../lazyLoad.ts"
import { Api } from "./Api.ts"
import { envelopeResponse } from "./errors.ts"

/**
 * GET /docs: the Scalar API reference of the API, served by this server alone.
 *
 * Scalar's browser bundle ships inside Effect (the module behind
 * `HttpApiScalar.layer`), as one 3 MB string literal. Mounted with that
 * layer, the module is imported when the server starts (and the page built
 * from it, as JavaScript strings, by the first request): about 27 MB of the
 * server's resident memory from its start, for a page few ever open. Here
 * nothing of it is loaded until the page is first asked for; then the bundle
 * is read from that module's file, the page is built once and kept as bytes
 * outside the JavaScript heap (3.4 MB), and every later request is answered
 * with those bytes.
 *
 * The file is not an export of Effect's package, so another Effect release
 * may move it or change its shape: a file that cannot be read as expected is
 * imported instead and its export taken, as Effect's layer does (the module
 * then stays loaded, as it did with the layer). Only when that fails too does
 * GET /docs answer 500; the tests read the file of the Effect version the
 * lockfile installs.
 *
 * The page is the one Effect's layer builds: the bundle inline (so the page
 * loads nothing from elsewhere), Scalar's default fonts off (they would come
 * from Scalar's CDN), the OpenAPI document of the API as its content.
 */

export const DOCS_PATH = "/docs"

/** The file of Effect's module that holds Scalar's bundle (not an export of the package: found beside its public module). */
const bundleFile = (): URL => new URL("./internal/httpApiScalar.js", import.meta.resolve("effect/http-api/HttpApiScalar"))

/** Scalar's bundle, or an error saying the module did not hold it. */
const checkedBundle = (bundle: unknown): string => {
  if (typeof bundle !== "string" || !bundle.includes("createApiReference")) {
    throw new Error("Effect's HttpApiScalar module does not hold Scalar's bundle")
  }
  return bundle
}

/**
 * Scalar's browser bundle, out of the module's source: the module is
 * `export const javascript = "…"` with the bundle as a JSON string literal.
 * A file of any other shape is refused (an Effect release that changed it),
 * rather than serving part of it.
 */
export const scalarBundle = (source: string): string => {
  const start = source.indexOf("javascript=")
  const end = source.lastIndexOf("\";")
  if (start < 0 || end < start) throw new Error("Scalar's bundle was not found in Effect's HttpApiScalar module")
  return checkedBundle(JSON.parse(source.slice(start + "javascript=".length, end + 1)))
}

/** The bundle as Effect's layer takes it: the module imported (by file URL, beside the package's exports) and its export read. */
export const importScalarBundle = async (): Promise<string> =>
  checkedBundle(((await import(bundleFile().href)) as { readonly javascript?: unknown }).javascript)

const escapeText = (text: string): string => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
const escapeAttribute = (text: string): string => escapeText(text).replace(/"/g, "&quot;").replace(/'/g, "&#39;")
/** JSON inside a script element: no `<` (so no `</script>`), and no line terminators JavaScript would refuse. */
const scriptJson = (value: unknown): string =>
  JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/[\u2028\u2029]/g, (c) => (c === "\u2028" ? "\\u2028" : "\\u2029"))

/** The page, from the bundle and the API's OpenAPI document. */
export const docsPage = (bundle: string): string => {
  const spec = OpenApi.fromApi(Api)
  const description = spec.info.description
  const describe = description === undefined || description === ""
    ? ""
    : `<meta name="description" content="${escapeAttribute(description)}"/>
    <meta name="og:description" content="${escapeAttribute(description)}"/>`
  // The bundle goes in as it is: a minified script whose text never closes its own element.
  return `<!doctype html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>${escapeText(spec.info.title)}</title>
    ${describe}
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <div id="api-reference-container"></div>
    <script>${bundle}</script>
    <script>
      window.Scalar.createApiReference(document.getElementById('api-reference-container'), {
        ...${scriptJson({ _integration: "html", withDefaultFonts: false })},
        content: ${scriptJson(spec)}
      })
    </script>
  </body>
</html>`
}

/** Reads the source of Effect's module that holds Scalar's bundle. */
export const readScalarModule = (): Promise<string> => readFile(bundleFile(), "utf8")

export interface DocsOptions {
  /** Reads the source of the module holding the bundle (default: its file). */
  readonly readModule?: () => Promise<string>
  /** The bundle when the source cannot be read as expected (default: the module imported). */
  readonly importBundle?: () => Promise<string>
}

/** The bundle from the module's source; from the module's export when the source cannot be read as expected. */
const loadBundle = async (options: DocsOptions): Promise<string> => {
  try {
    return scalarBundle(await (options.readModule ?? readScalarModule)())
  } catch {
    return (options.importBundle ?? importScalarBundle)()
  }
}

/**
 * GET /docs on the server's router. The page is built by its first request
 * and kept; a bundle that can be neither read nor imported answers 500 in
 * the error envelope, is logged, and is not kept: the next request tries
 * again.
 */
export const mountDocs = (options: DocsOptions = {}) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const router = yield* HttpRouter.HttpRouter
    const page = loadOnceUnlessFailed(async () => Buffer.from(docsPage(await loadBundle(options))))
    yield* router.add(
      "GET",
      DOCS_PATH,
      Effect.tryPromise(page).pipe(
        Effect.map((bytes) => HttpServerResponse.uint8Array(bytes, { contentType: "text/html; charset=utf-8" })),
        Effect.catchCause((cause) =>
          Effect.as(
            Effect.logError("GET /docs: Scalar's bundle could not be read", cause),
            envelopeResponse("INTERNAL", "Internal error")
          )
        )
      )
    )
  }))
