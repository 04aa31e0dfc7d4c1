import { Context } from "effect"
import { HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import type { Principal } from "../../src/domain/Agent.ts"
import { BadRequest, Conflict, Forbidden, NotFound, TooManyRequests, Unauthorized } from "./errors.ts"

/** The contract's middleware: bearer-key authentication and Idempotency-Key handling. */

export class CurrentPrincipal extends Context.Service<CurrentPrincipal, Principal>()("spendgate/http/CurrentPrincipal") {}

export class Authentication extends HttpApiMiddleware.Service<Authentication, {
  provides: CurrentPrincipal
  requires: never
}>()("spendgate/http/Authentication", {
  security: { bearer: HttpApiSecurity.bearer },
  error: [Unauthorized, Forbidden, TooManyRequests]
}) {}

/**
 * `Idempotency-Key` support, implemented in idempotency.ts. Applied to single
 * endpoints: an endpoint's own middleware runs inside its group's, so on an
 * authenticated group it sees the caller's account.
 */
export class IdempotencyKeys extends HttpApiMiddleware.Service<IdempotencyKeys>()("spendgate/http/IdempotencyKeys", {
  error: [BadRequest, Conflict]
}) {}

/** The operator: `Authorization: Bearer <ADMIN_TOKEN>` on /v1/admin/*. */
export class AdminAuthentication extends HttpApiMiddleware.Service<AdminAuthentication>()(
  "spendgate/http/AdminAuthentication",
  {
    security: { bearer: HttpApiSecurity.bearer },
    error: [Unauthorized, Forbidden, NotFound]
  }
) {}
