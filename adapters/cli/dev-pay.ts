/**
 * Pays a dev-rail Lightning invoice of a running Spendgate server, standing in
 * for a wallet app:
 *
 *   npm run dev:pay -- <paymentRequest | invoiceId> [--url http://127.0.0.1:8080] [--key sk_agt_…]
 *
 * The same as `spendgate dev pay` (adapters/cli/commands/dev.ts). The server
 * is --url, else SPENDGATE_URL, else port PORT (default 8080) on 127.0.0.1.
 * The server only accepts this while its Lightning rail is the dev rail.
 */
import { packageVersion } from "../packageVersion.ts"
import { main } from "./main.ts"

if (process.env["SPENDGATE_URL"] === undefined && process.env["PORT"] !== undefined) {
  process.env["SPENDGATE_URL"] = `http://127.0.0.1:${process.env["PORT"]}`
}
// The package's version, found from the sources (adapters/cli/) and from the build (dist/adapters/cli/) alike.
main(["dev", "pay", ...process.argv.slice(2)], packageVersion(import.meta.url) ?? "unknown")
