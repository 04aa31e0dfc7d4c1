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
 * The access matrix (src/access/matrix.ts), implemented in access.ts. Declared
 * on every group before its authentication middleware, so that it runs right
 * after authentication and before the endpoint's own middleware
 * (IdempotencyKeys) and the handler: a group's `.middleware(m)` appends `m`
 * to each endpoint's list, and the builder wraps the handler in that list's
 * order, so the last one declared runs first.
 */
export class AccessControl extends HttpApiMiddleware.Service<AccessControl>()("spendgate/http/AccessControl", {
  error: [Forbidden, NotFound]
}) {}

/**
 * `Idempotency-Key` support, implemented in idempotency.ts. Applied to single
 * endpoints: an endpoint's own middleware runs inside its group's, so it sees
 * the caller (keys are scoped per agent) and only requests the access matrix
 * let through.
 */
export class IdempotencyKeys extends HttpApiMiddleware.Service<IdempotencyKeys>()("spendgate/http/IdempotencyKeys", {
  error: [BadRequest, Conflict]
}) {}

/**
 * Who may sign up (SIGNUP: open and limited per address, token, or closed),
 * implemented in rateLimit.ts. Declared on the signup endpoint after
 * IdempotencyKeys so that it runs before it: a stored signup answer (which
 * holds an owner key) is never replayed to a caller the gate would refuse.
 */
export class SignupAdmission extends HttpApiMiddleware.Service<SignupAdmission>()("spendgate/http/SignupAdmission", {
  error: [Unauthorized, Forbidden, TooManyRequests]
}) {}

/** The operator: `Authorization: Bearer <ADMIN_TOKEN>` on /v1/admin/*. */
export class AdminAuthentication extends HttpApiMiddleware.Service<AdminAuthentication>()(
  "spendgate/http/AdminAuthentication",
  {
    security: { bearer: HttpApiSecurity.bearer },
    error: [Unauthorized, Forbidden, NotFound]
  }
) {}
