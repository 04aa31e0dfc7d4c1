import { Effect } from "effect"
import { Command } from "effect/cli"
import { flushCompileCache } from "node:module"

/**
 * `spendgate serve`: the HTTP API, configured from the environment. With
 * nothing after it (what `npm start` runs) bin/spendgate.js starts the
 * server's entry point, adapters/http/main.ts, without loading the command
 * line; this command is what `serve` followed by anything (`serve --help`)
 * reaches.
 */
export const serve = Command.make("serve", {}, () =>
  // Loaded on use, so `--help` and the other subcommands do not load the server.
  Effect.promise(() => import("../../http/serve.ts")).pipe(
    // The server's modules are loaded: the compile cache is written now, not only at exit.
    Effect.tap(() => Effect.sync(() => flushCompileCache())),
    Effect.flatMap((server) => server.serveFromEnvironment)
  )).pipe(
    Command.withDescription(
      "Serve the HTTP API, configured from the environment (PORT, HOST, DATABASE_URL or DATA_DIR, ADMIN_TOKEN, ...; see the README)"
    )
  )
