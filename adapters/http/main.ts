import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { teardown } from "../teardown.ts"
import { serveFromEnvironment } from "./serve.ts"

/**
 * The server on its own: `node adapters/http/main.ts` (what `spendgate serve`
 * runs). SIGTERM or SIGINT stops it gracefully: see `serveFromEnvironment`.
 */
NodeRuntime.runMain(serveFromEnvironment, { teardown })
