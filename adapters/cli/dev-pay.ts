/**
 * Pays a dev-rail Lightning invoice of a running Spendgate server, standing in
 * for a wallet app:
 *
 *   npm run dev:pay -- <paymentRequest> [--url http://127.0.0.1:8080]
 *
 * The server only accepts this while its Lightning rail is the dev rail.
 */
const args = process.argv.slice(2)
const urlFlag = args.indexOf("--url")
const baseUrl = urlFlag >= 0 && args[urlFlag + 1] !== undefined
  ? args[urlFlag + 1]!
  : process.env["SPENDGATE_URL"] ?? `http://127.0.0.1:${process.env["PORT"] ?? "8080"}`
const paymentRequest = args.find((arg, i) => !arg.startsWith("--") && (urlFlag < 0 || i !== urlFlag + 1))

if (paymentRequest === undefined) {
  console.error("usage: npm run dev:pay -- <paymentRequest> [--url http://127.0.0.1:8080]")
  process.exit(2)
}

try {
  const response = await fetch(new URL("/v1/dev/lightning/pay", baseUrl), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ paymentRequest }),
    signal: AbortSignal.timeout(15_000)
  })
  const body = await response.json() as { outcome?: string; invoiceId?: string; error?: { code: string; message: string } }
  if (!response.ok || body.outcome === undefined) {
    console.error(`not paid: ${body.error?.code ?? response.status} ${body.error?.message ?? ""}`.trim())
    process.exit(1)
  }
  console.log(`${body.invoiceId}: ${body.outcome}`)
  process.exit(body.outcome === "credited" || body.outcome === "duplicate" ? 0 : 1)
} catch (error) {
  console.error(`could not reach ${baseUrl}: ${error instanceof Error ? error.message : String(error)}`)
  process.exit(1)
}
