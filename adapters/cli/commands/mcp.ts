import { Effect } from "effect"
import { Command } from "effect/cli"

/** `spendgate mcp`: the stdio MCP server for desktop agent hosts, in front of a running Spendgate. */
export const mcp = Command.make("mcp", {}, () =>
  // Loaded on use, like every subcommand's implementation.
  Effect.promise(() => import("../../mcp/stdioServer.ts")).pipe(
    Effect.flatMap((stdio) => Effect.promise(() => stdio.serveStdio())),
    Effect.flatMap((code) =>
      Effect.sync(() => {
        if (code !== 0) process.exitCode = code
      })
    )
  )).pipe(
    Command.withDescription(
      "Serve MCP over stdio for an agent host, with SPENDGATE_API_KEY (the agent's key) and SPENDGATE_URL (default http://127.0.0.1:8080)"
    )
  )
