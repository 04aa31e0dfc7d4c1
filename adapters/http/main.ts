import { enableCompileCache, flushCompileCache } from "node:module"

/**
 * The server on its own: `node adapters/http/main.ts` (what `spendgate serve`
 * runs). SIGTERM or SIGINT stops it gracefully: see `serveFromEnvironment`.
 *
 * Node's compile cache (in the system's temporary directory, or
 * NODE_COMPILE_CACHE; NODE_DISABLE_COMPILE_CACHE=1 turns it off) keeps the
 * compiled modules between starts, so a restart skips parsing (and type
 * stripping) them again. It is written out once the modules are loaded, so a
 * server that is later killed still leaves it behind.
 */
enableCompileCache()
const [NodeRuntime, { teardown }, { serveFromEnvironment }] = await Promise.all([
  import("@effect/platform-node/NodeRuntime"),
  import("../teardown.ts"),
  import("./serve.ts")
])
flushCompileCache()
NodeRuntime.runMain(serveFromEnvironment, { teardown })
