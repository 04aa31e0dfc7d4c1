import { Layer } from "effect"
import type { CardRail, LightningRail } from "../../src/ports/Rails.ts"
import * as DevCard from "./DevCard.ts"
import * as DevLightning from "./DevLightning.ts"

/** Both built-in development rails: no credentials, nothing leaves the machine. */
export const devRails = (options: {
  readonly dataDir: string | undefined
  readonly publicUrl: string
}): Layer.Layer<LightningRail | CardRail> =>
  Layer.mergeAll(DevLightning.layer({ dataDir: options.dataDir }), DevCard.layer({ publicUrl: options.publicUrl }))
