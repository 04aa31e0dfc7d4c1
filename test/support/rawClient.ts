import * as Net from "node:net"

/** A raw HTTP/1.1 connection to a test server, for what a client library hides (keep-alive, the connection itself). */
export interface RawClient {
  readonly socket: Net.Socket
  /** Sends `request` and resolves with the whole answer (head and JSON body); fails if the connection closes first. */
  readonly ask: (request: string) => Promise<string>
  /** Whether the connection has closed (either side). */
  readonly closed: () => boolean
}

export const connectRaw = async (port: number): Promise<RawClient> => {
  const socket = Net.connect({ port, host: "127.0.0.1" })
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject))
  let text = ""
  let closed = false
  socket.on("data", (chunk) => (text += chunk.toString()))
  socket.on("error", () => {})
  socket.on("close", () => (closed = true))
  const ask = async (request: string) => {
    text = ""
    socket.write(request)
    for (let waited = 0; !/\r\n\r\n[\s\S]*\}/.test(text); waited += 10) {
      if (closed || waited > 10_000) throw new Error(`no answer (closed: ${closed}): ${text}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    return text
  }
  return { socket, ask, closed: () => closed }
}
