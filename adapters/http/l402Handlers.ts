import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { L402Payments } from "../../src/l402/Pay.ts"
import { Api } from "./Api.ts"
import { toHttpError } from "./errors.ts"
import { CurrentPrincipal } from "./middleware.ts"

export const L402Handlers = HttpApiBuilder.group(
  Api,
  "l402",
  Effect.fn(function*(handlers) {
    const payments = yield* L402Payments
    return handlers
      .handle("payeeHosts", () =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const hosts = yield* payments.payeeHosts(principal).pipe(Effect.mapError(toHttpError))
          return { hosts: [...hosts] }
        }))
      .handle("setPayeeHosts", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const hosts = yield* payments.setPayeeHosts(principal, payload.hosts).pipe(Effect.mapError(toHttpError))
          return { hosts: [...hosts] }
        }))
  })
)
