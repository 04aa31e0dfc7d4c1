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
 * layer, the module is imported when the server starts and the page is built
 * from it as JavaScript strings: about 27 MB of the server's resident memory
 * from its start, for a page few ever open. Here nothing of it is loaded until
 * the page is first asked for; then the bundle is read from that module's
 * file, the page is built once and kept as bytes outside the JavaScript heap
 * (3.4 MB), and every later request is answered with those bytes.
 *
 * The page is the one Effect's layer builds: the bundle inline (so the page
 * loads nothing from elsewhere), Scalar's default fonts off (they would come
 * from Scalar's CDN), the OpenAPI document of the API as its content.
 */

export const DOCS_PATH = "/docs"

/** The file of Effect's module that holds Scalar's bundle (not an export of the package: found beside its public module). */
const bundleFile = (): URL => new URL("./internal/httpApiScalar.js", import.meta.resolve("effect/http-api/HttpApiScalar"))

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
  const literal = source.slice(start + "javascript=".length, end + 1)
  const bundle: unknown = JSON.parse(literal)
  if (typeof bundle !== "string" || !bundle.includes("createApiReference")) {
    throw new Error("Effect's HttpApiScalar module does not hold Scalar's bundle")
  }
  return bundle
}

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

/**
 * GET /docs on the server's router. The page is built by its first request
 * and kept; a bundle that cannot be read (or is not the expected shape)
 * answers 500 in the error envelope, is logged, and is not kept: the next
 * request reads it again.
 */
export const mountDocs = (options: { readonly readModule?: () => Promise<string> } = {}) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const router = yield* HttpRouter.HttpRouter
    const readModule = options.readModule ?? readScalarModule
    const page = loadOnceUnlessFailed(async () => Buffer.from(docsPage(scalarBundle(await readModule()))))
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
