import { Command } from "effect/cli"
import { serveFromEnvironment } from "../../http/serve.ts"

/** `spendgate serve`: the HTTP API, configured from the environment (what `npm start` runs). */
export const serve = Command.make("serve", {}, () => serveFromEnvironment).pipe(
  Command.withDescription(
    "Serve the HTTP API, configured from the environment (PORT, HOST, DATABASE_URL or DATA_DIR, ADMIN_TOKEN, ...; see the README)"
  )
)
