import { Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { emit, field, jsonFlag, request, urlFlag } from "../client.ts"

/** `spendgate signup --name ops`: a new account and its owner agent; the key is printed once. */
export const signup = Command.make("signup", {
  url: urlFlag,
  json: jsonFlag,
  name: Flag.String("name").pipe(Flag.withDescription("Name of the owner agent")),
  signupToken: Flag.String("signup-token").pipe(
    Flag.withDescription("With SIGNUP=token on the server: its SIGNUP_TOKEN"),
    Flag.optional
  )
}, ({ json, name, signupToken, url }) =>
  Effect.gen(function*() {
    // The signup token travels as the bearer credential, like the admin token does elsewhere.
    const body = yield* request({ url, adminToken: signupToken }, "/v1/signup", {
      auth: signupToken._tag === "Some" ? "admin" : "none",
      body: { name }
    })
    yield* emit(json, body, () =>
      [
        `account  ${field(body, "accountId")}`,
        `agent    ${field(body, "agentId")} (owner)`,
        `key      ${field(body, "apiKey")}`,
        "The key is shown once: store it now (e.g. export SPENDGATE_API_KEY=…)."
      ].join("\n"))
  })).pipe(Command.withDescription("Create an account and its owner agent; prints the owner's API key once"))
