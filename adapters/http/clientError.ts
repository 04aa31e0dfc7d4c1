import { randomUUID } from "node:crypto"
import type { Server } from "node:http"
import type { Socket } from "node:net"

/**
 * Requests that Node's HTTP parser refuses before the application sees them
 * (a request line or headers over the 16 KiB limit, a malformed request, a
 * request that took too long to arrive) are answered in the error envelope
 * too, instead of Node's default empty-bodied 4xx, with a request id of their
 * own in `X-Request-Id` and `error.requestId` like every other answer.
 */

const answers: Record<string, { readonly status: number; readonly reason: string; readonly code: string; readonly message: string }> = {
  HPE_HEADER_OVERFLOW: {
    status: 431,
    reason: "Request Header Fields Too Large",
    code: "HEADERS_TOO_LARGE",
    message: "The request line and headers together exceed 16 KiB"
  },
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    reason: "Request Timeout",
    code: "REQUEST_TIMEOUT",
    message: "The request did not arrive in time"
  }
}

const malformed = {
  status: 400,
  reason: "Bad Request",
  code: "VALIDATION_ERROR",
  message: "Malformed HTTP request"
}

export const answerClientError = (error: Error & { readonly code?: string }, socket: Socket): void => {
  // Nothing can be written on a socket that is gone or already answering.
  if (error.code === "ECONNRESET" || !socket.writable) {
    socket.destroy()
    return
  }
  const answer = answers[error.code ?? ""] ?? malformed
  // A fresh id, like any other answer's (the request's own header may be the part that was refused).
  const requestId = randomUUID()
  const body = JSON.stringify({ error: { code: answer.code, message: answer.message, requestId } })
  socket.end(
    `HTTP/1.1 ${answer.status} ${answer.reason}\r\n` +
      "Content-Type: application/json\r\n" +
      `X-Request-Id: ${requestId}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      "Connection: close\r\n\r\n" +
      body
  )
}

/** `http.createServer` with the envelope for parser-level refusals. */
export const withClientErrors = (server: Server): Server => server.on("clientError", answerClientError)
