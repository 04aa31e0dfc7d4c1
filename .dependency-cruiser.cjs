/**
 * The project's import boundaries, checked by dependency-cruiser
 * (`npm run boundaries`, part of `npm test` through test/boundaries.test.ts).
 *
 * Violations that exist today and are being removed are listed, one per
 * import, in .dependency-cruiser-known-violations.json: they are reported
 * but do not fail the check; any other violation does. Remove an entry when
 * its import is gone (`npm run boundaries:baseline` rewrites the list from
 * what is left; never add to it to get a new import through).
 */
/** @type {import("dependency-cruiser").IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "core-not-to-adapters",
      comment: "src/ is the pure core: it defines ports and never imports an adapter.",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "^adapters/" }
    },
    {
      name: "core-no-node-builtins",
      comment: "src/ runs anywhere Effect runs: no node: modules (files, sockets, processes belong to adapters).",
      severity: "error",
      from: { path: "^src/" },
      to: { dependencyTypes: ["core"] }
    },
    {
      name: "core-no-http-or-sql",
      comment: "src/ knows no transport, database or process: effect/http, effect/http-api, effect/sql, effect/socket, effect/process and the platform and SQL packages are adapters' business.",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "(^|/)node_modules/(effect/dist/(http|http-api|sql|socket|process)/|@effect/(platform|sql))" }
    },
    {
      name: "providers-not-sideways",
      comment: "A provider is one folder: it may use its own files and the shared kit (adapters/providers/kit/), never another provider's files.",
      severity: "error",
      from: { path: "^adapters/providers/([^/]+)/" },
      to: { path: "^adapters/providers/", pathNot: "^adapters/providers/($1|kit)/" }
    },
    {
      name: "only-http-imports-http",
      comment: "adapters/http is the HTTP adapter: nothing outside it imports it (a rail's routes reach it through a port), but the command line that starts it (adapters/cli).",
      severity: "error",
      from: { path: "^(src|adapters|examples|bench)/", pathNot: "^adapters/(http|cli)/" },
      to: { path: "^adapters/http/" }
    },
    {
      name: "http-rates-through-port",
      comment: "The HTTP adapter reads rates through the core's port, not from the exchange adapter.",
      severity: "error",
      from: { path: "^adapters/http/" },
      to: { path: "^adapters/rates/" }
    },
    {
      name: "no-circular-core",
      comment: "The core's modules form no import cycle.",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true }
    },
    {
      name: "not-to-unresolvable",
      comment: "Every import resolves (a typo or a missing dependency).",
      severity: "error",
      // The dashboard's browser modules import Preact and htm as /ui/vendor/*.mjs, files the
      // server makes from the installed packages at start (adapters/http/dashboard/static.ts).
      from: {},
      to: { couldNotResolve: true, pathNot: "^\\./vendor/(preact|hooks|htm)\\.mjs$" }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)\\.(readme|docs)-snippets-" },
    parser: "swc",
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      // "spendgate-source": the package's own name resolves to its sources here, not to dist/.
      conditionNames: ["spendgate-source", "import", "require", "node", "default", "types"],
      extensions: [".ts", ".js", ".mjs", ".cjs", ".d.ts"],
      mainFields: ["module", "main", "types", "typings"]
    }
  }
}
