import { Effect, Layer } from "effect"
import { randomBase62 } from "../../src/domain/ids.ts"
import { CardRail } from "../../src/ports/Rails.ts"

export { cardRoutes as routes } from "./devRoutes.ts"

/**
 * The built-in card rail for development: no card network, no credentials.
 * Its checkout URL is a page of this server (`/dev/checkout/{sessionId}`,
 * one of this rail's `routes`, in devRoutes.ts) whose Pay button completes the
 * session. Never configure it in production: anyone who can reach the page
 * can "pay".
 */
export const layer = (options: { readonly publicUrl: string }): Layer.Layer<CardRail> =>
  Layer.succeed(
    CardRail,
    CardRail.of({
      name: "dev",
      createCheckout: () =>
        Effect.sync(() => {
          const sessionId = `cs_dev_${randomBase62(24)}`
          return { sessionId, checkoutUrl: `${options.publicUrl.replace(/\/+$/, "")}/dev/checkout/${sessionId}` }
        })
    })
  )
