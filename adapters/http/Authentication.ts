import { Context } from "effect"
import { HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import type { Principal } from "../../src/domain/Agent.ts"
import { Forbidden, Unauthorized } from "./errors.ts"

/** Bearer-key authentication of /v1: resolves the key to the calling agent. */

export class CurrentPrincipal extends Context.Service<CurrentPrincipal, Principal>()("spendgate/http/CurrentPrincipal") {}

export class Authentication extends HttpApiMiddleware.Service<Authentication, {
  provides: CurrentPrincipal
  requires: never
}>()("spendgate/http/Authentication", {
  security: { bearer: HttpApiSecurity.bearer },
  error: [Unauthorized, Forbidden]
}) {}
