import { serveStdio } from "./stdioServer.ts"

/**
 * The MCP server over stdio as a script: `node adapters/mcp/stdio.ts` (the
 * same as `spendgate mcp`; settings in ./stdioServer.ts).
 */
process.exitCode = await serveStdio()
