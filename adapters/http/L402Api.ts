import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { BadRequest, Forbidden } from "./errors.ts"
import { AccessControl, Authentication } from "./middleware.ts"

/** Outbound L402: the account's allow-list of payee hosts (docs/l402.md). */

export const PayeeHosts = Schema.Struct({
  hosts: Schema.Array(Schema.String.check(Schema.isMaxLength(261))).annotate({
    description: "Hosts (name or IP, optional :port) whose L402 invoices agents of this account may pay; empty: none"
  })
})

export class L402Api extends HttpApiGroup.make("l402")
  .add(
    HttpApiEndpoint.get("payeeHosts", "/payee-hosts", { success: PayeeHosts, error: [BadRequest, Forbidden] }),
    HttpApiEndpoint.put("setPayeeHosts", "/payee-hosts", {
      payload: PayeeHosts,
      success: PayeeHosts,
      error: [BadRequest, Forbidden]
    })
  )
  .middleware(AccessControl)
  .middleware(Authentication)
  .prefix("/v1/l402")
  .annotateMerge(OpenApi.annotations({ title: "L402", description: "Paying L402 (Lightning) paywalls: the payee hosts allowed" }))
{}
