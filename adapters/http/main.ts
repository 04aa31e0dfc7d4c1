import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { serveFromEnvironment } from "./serve.ts"

/** The server on its own: `node adapters/http/main.ts` (what `spendgate serve` runs). */
NodeRuntime.runMain(serveFromEnvironment)
