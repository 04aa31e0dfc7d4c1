import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { httpBackend } from "./backend.ts"
import { makeMcpServer } from "./server.ts"

/**
 * The MCP server over stdio, for desktop agent hosts (`spendgate mcp`), with
 * SPENDGATE_API_KEY (the agent's `sk_agt_` key) and SPENDGATE_URL (a running
 * Spendgate, default http://127.0.0.1:8080). It talks to that server's API
 * with the key, so the server keeps sole hold of its storage and every tool
 * call goes through its authentication, rate limits and spend pipeline.
 * stdout carries only MCP messages; diagnostics go to stderr.
 *
 * Resolves with the process exit code once the host closes stdin or the
 * connection (0), or at once with 2 when a setting is wrong.
 */
export const serveStdio = async (env: NodeJS.ProcessEnv = process.env): Promise<number> => {
  const key = env["SPENDGATE_API_KEY"]?.trim() ?? ""
  const url = env["SPENDGATE_URL"]?.trim() || "http://127.0.0.1:8080"

  if (!/^sk_agt_[A-Za-z0-9]{32}$/.test(key)) {
    process.stderr.write("spendgate mcp: set SPENDGATE_API_KEY to the agent's key (sk_agt_ followed by 32 letters and digits)\n")
    return 2
  }
  let base: URL
  try {
    base = new URL(url)
    if (base.protocol !== "http:" && base.protocol !== "https:") throw new Error("not http(s)")
  } catch {
    process.stderr.write(`spendgate mcp: SPENDGATE_URL must be an http(s) URL, got ${JSON.stringify(url.slice(0, 200))}\n`)
    return 2
  }

  const server = makeMcpServer(httpBackend(base.href, key))
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve()
    process.stdin.once("end", () => resolve())
    process.stdin.once("close", () => resolve())
  })
  await server.connect(new StdioServerTransport())
  process.stderr.write(`spendgate mcp: serving over stdio for ${base.origin}\n`)
  await closed
  return 0
}
