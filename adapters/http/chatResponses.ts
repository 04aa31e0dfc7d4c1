import { HttpServerResponse } from "effect/http"
import { microUsdToCents } from "../../src/domain/Money.ts"
import type { ChatResult, StreamedChat } from "../../src/services/Services.ts"
import type { SpendReceipt } from "../../src/wallet/Spend.ts"

/**
 * The answers of the chat routes in every wire format (OpenAI's chat
 * completions, Anthropic's Messages): the upstream's answer as it came, with
 * the charge in `x-spendgate-*` headers.
 */

const cents = (microUsd: bigint) => String(microUsdToCents(microUsd))

/** The Spendgate headers of a settled call: the charge, the quote, the receipt id and the provider. */
export const spendHeaders = (receipt: SpendReceipt, provider: string) => ({
  "x-spendgate-charged-usd-cents": cents(receipt.chargedMicroUsd),
  "x-spendgate-quoted-usd-cents": cents(receipt.quotedMicroUsd),
  "x-spendgate-audit-id": receipt.auditId,
  "x-spendgate-provider": provider
})

/** A streamed call: the upstream's events; the quote and the service in headers (the charge is known only at the end). */
export const streamedChatResponse = (streamed: StreamedChat) =>
  HttpServerResponse.stream(streamed.body, {
    status: streamed.status,
    headers: {
      ...streamed.headers,
      "cache-control": "no-cache",
      "x-spendgate-quoted-usd-cents": cents(streamed.quotedMicroUsd),
      "x-spendgate-provider": streamed.service
    },
    contentType: streamed.headers["content-type"] ?? "text/event-stream"
  })

/** A whole answer: the upstream's body and status, with the charge, the quote, the receipt id and the service in headers. */
export const chatResponse = (result: ChatResult) => {
  const { status, headers, body: answer } = result.response
  const { ["content-type"]: _contentType, ...rest } = headers
  const options = {
    status,
    headers: {
      ...rest,
      ...spendHeaders(result.receipt, result.service)
    }
  }
  return typeof answer === "string"
    ? HttpServerResponse.text(answer, { ...options, contentType: headers["content-type"] ?? "text/plain" })
    : HttpServerResponse.jsonUnsafe(answer, options)
}
