#!/usr/bin/env node
// The `spendgate` command. Plain JavaScript that any Node version can parse:
// nothing below may use syntax newer than Node 18 before the version check,
// so an old Node prints one clear line instead of a crash.
"use strict"

var REQUIRED = [22, 19]
var found = process.versions.node
var parts = found.split(".").map(Number)
var recent = parts[0] > REQUIRED[0] || (parts[0] === REQUIRED[0] && parts[1] >= REQUIRED[1])

if (!recent) {
  process.stderr.write(
    "spendgate needs Node.js " + REQUIRED.join(".") + " or newer, but this is Node.js " + found +
      " (" + process.execPath + "): install Node.js 24, or in a clone of the repository run `npm install`" +
      " without --omit=dev, which brings the pinned Node.js 24 that `npm start` uses.\n"
  )
  process.exit(1)
}

import("node:fs").then(function (fs) {
  var read = function (relative) {
    return fs.readFileSync(new URL(relative, import.meta.url), "utf8")
  }
  var version = JSON.parse(read("../package.json")).version
  // In a clone (the sources are there and outside node_modules), run the
  // TypeScript sources with Node's type stripping, so a stale dist/ is never
  // run; an installed package runs its built JavaScript.
  var args = process.argv.slice(2)
  // `spendgate serve` with nothing after it (what `npm start` runs) starts the
  // server's own entry point, adapters/http/main: the same server, without
  // loading the command line's parser for a command that has no flags (about
  // 6 MB of resident memory for the life of the server). Anything else, such
  // as `serve --help`, goes through the command line.
  var serveOnly = args.length === 1 && args[0] === "serve"
  var entry = serveOnly ? "adapters/http/main" : "adapters/cli/main"
  var sources = new URL("../" + entry + ".ts", import.meta.url)
  var built = new URL("../dist/" + entry + ".js", import.meta.url)
  var fromSources = fs.existsSync(sources) && sources.pathname.indexOf("/node_modules/") === -1
  if (!fromSources && !fs.existsSync(built)) {
    process.stderr.write("spendgate: the built JavaScript (dist/) is missing: run `npm run build` in the package first.\n")
    process.exit(1)
  }
  // Node's compile cache keeps the compiled modules between starts (see
  // adapters/http/main.ts). Enabled here, before the first TypeScript module
  // loads, a start with the cache written skips type stripping altogether, so
  // Node's TypeScript stripper is never loaded (about 16 MB of resident memory).
  // In a clone, the command runs the bundle (made by `npm install`, or
  // `npm run bundle`; its server entry for `serve`, its command line's for
  // the rest) while it was made from exactly the files checked out: a few
  // chunks to load instead of hundreds of modules (scripts/server-bundle.mjs;
  // SPENDGATE_BUNDLE=off runs the sources).
  var bundled = fromSources
    ? import(new URL("../scripts/server-bundle.mjs", import.meta.url).href).then(
        function (bundle) { return bundle.freshBundle(undefined, undefined, serveOnly ? "server" : "cli").entry },
        function () { return undefined }
      )
    : Promise.resolve(undefined)
  return Promise.all([import("node:module"), bundled]).then(function (both) {
    var module = both[0]
    if (typeof module.enableCompileCache === "function") module.enableCompileCache()
    return import((both[1] !== undefined ? both[1] : fromSources ? sources : built).href)
  }).then(function (loaded) {
    if (!serveOnly) loaded.main(args, version)
  })
})
