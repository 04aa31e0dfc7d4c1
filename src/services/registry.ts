import { Effect, Option, Result } from "effect"
import { requireOwner } from "../agents/Access.ts"
import type { Principal } from "../domain/Agent.ts"
import { Conflict, type Forbidden, NotFound, ValidationError } from "../domain/errors.ts"
import { centsToMicroUsd } from "../domain/Money.ts"
import type { OutboundHttp, UnsafeUrl } from "../ports/Net.ts"
import type { RegistryStore } from "../ports/RegistryStore.ts"
import type { Page, PageRequest } from "../ports/Store.ts"
import { DEFAULT_PROXY_MAX_TOKENS } from "./quote.ts"
import {
  type EndpointPrice,
  newSubmissionId,
  type Service,
  type ServiceEndpoint,
  type Submission,
  type SubmissionInput
} from "./Service.ts"

/**
 * The registry: community services submitted by an account's owner, checked
 * (https, no credentials in the URL, every endpoint priced, an address the
 * proxy may reach) and reviewed by the operator. An approved submission
 * joins the catalogue as a service.
 */

const priceFromSubmission = (price: SubmissionInput["pricing"][string]): EndpointPrice | null => {
  if ("perCallUsdCents" in price) {
    const micro = centsToMicroUsd(price.perCallUsdCents)
    return Result.isSuccess(micro) ? { kind: "perCall", priceMicroUsd: micro.success } : null
  }
  const models = []
  for (const [id, m] of Object.entries(price.models)) {
    const input = centsToMicroUsd(m.inputPer1kTokens)
    const output = centsToMicroUsd(m.outputPer1kTokens)
    if (Result.isFailure(input) || Result.isFailure(output)) return null
    models.push({
      id,
      inputPer1kMicroUsd: input.success,
      outputPer1kMicroUsd: output.success,
      maxTokens: m.maxTokens,
      defaultMaxTokens: Math.min(DEFAULT_PROXY_MAX_TOKENS, m.maxTokens)
    })
  }
  return { kind: "tokens", format: price.format, models }
}

export const serviceFromSubmission = (s: Submission): Service => ({
  slug: s.slug,
  name: s.name,
  description: s.description,
  baseUrl: s.baseUrl,
  capabilities: s.capabilities,
  origin: "registry",
  ...(s.l402 === true ? { l402: true } : {}),
  endpoints: s.endpoints.map((e): ServiceEndpoint => {
    const price = s.pricing[e.path]
    return { ...e, price: price === undefined ? null : priceFromSubmission(price) }
  })
})

/** What is wrong with a submission before anything is stored (empty: nothing). */
export const submissionIssues = (input: SubmissionInput): ReadonlyArray<{ readonly path: string; readonly message: string }> => {
  const issues: Array<{ path: string; message: string }> = []
  let url: URL | undefined
  try {
    url = new URL(input.baseUrl)
  } catch {
    issues.push({ path: "baseUrl", message: "Expected an absolute URL" })
  }
  if (url !== undefined && url.protocol !== "https:") issues.push({ path: "baseUrl", message: "Must be https" })
  if (url !== undefined && (url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "")) {
    issues.push({ path: "baseUrl", message: "No credentials, query or fragment" })
  }
  const seen = new Set<string>()
  input.endpoints.forEach((e, i) => {
    const key = `${e.method} ${e.path}`
    if (seen.has(key)) issues.push({ path: `endpoints.${i}`, message: `${key} is listed twice` })
    seen.add(key)
    const price = input.pricing[e.path]
    if (price === undefined) issues.push({ path: `pricing.${e.path}`, message: "Every endpoint needs a price" })
    else if (priceFromSubmission(price) === null) issues.push({ path: `pricing.${e.path}`, message: "Prices are USD cents with at most 4 decimals" })
  })
  for (const path of Object.keys(input.pricing)) {
    if (!input.endpoints.some((e) => e.path === path)) issues.push({ path: `pricing.${path}`, message: "Not a listed endpoint" })
  }
  return issues
}

export interface Registry {
  readonly submit: (principal: Principal, input: SubmissionInput) => Effect.Effect<Submission, Forbidden | ValidationError | UnsafeUrl | Conflict>
  readonly submissions: (principal: Principal, page: PageRequest) => Effect.Effect<Page<Submission>, Forbidden>
  readonly allSubmissions: (status: Submission["status"] | undefined, page: PageRequest) => Effect.Effect<Page<Submission>>
  readonly review: (id: string, status: "approved" | "rejected", note: string | null) => Effect.Effect<Submission, NotFound | Conflict>
}

export const makeRegistry = (deps: {
  readonly registry: RegistryStore["Service"]
  readonly operatorServices: ReadonlyArray<Service>
  readonly outbound: Option.Option<OutboundHttp["Service"]>
  readonly now: Effect.Effect<Date>
}): Registry => {
  const { registry, operatorServices, outbound, now } = deps

  const submit = Effect.fn("Services.submit")(function*(principal: Principal, input: SubmissionInput) {
    yield* requireOwner(principal, "submit services")
    const issues = submissionIssues(input)
    if (issues.length > 0) {
      return yield* new ValidationError({ message: `Invalid submission: ${issues[0]!.path}: ${issues[0]!.message}`, issues: [...issues] })
    }
    if (Option.isSome(outbound)) yield* outbound.value.check(input.baseUrl)
    if (operatorServices.some((s) => s.slug === input.slug)) {
      return yield* new Conflict({ message: `The slug ${input.slug} is taken` })
    }
    const submission: Submission = {
      ...input,
      id: newSubmissionId(),
      accountId: principal.agent.accountId,
      agentId: principal.agent.id,
      status: "pending",
      createdAt: yield* now,
      reviewedAt: null,
      reviewNote: null
    }
    const inserted = yield* registry.insert(submission)
    if (inserted === "SlugTaken") return yield* new Conflict({ message: `The slug ${input.slug} is taken` })
    return submission
  })

  const submissions = (principal: Principal, page: PageRequest) =>
    Effect.andThen(
      requireOwner(principal, "list registry submissions"),
      registry.list({ accountId: principal.agent.accountId }, page)
    )

  const allSubmissions = (status: Submission["status"] | undefined, page: PageRequest) => registry.list({ status }, page)

  const review = Effect.fn("Services.review")(function*(id: string, status: "approved" | "rejected", note: string | null) {
    const current = yield* registry.get(id)
    if (Option.isNone(current)) return yield* new NotFound({ resource: "Submission" })
    const reviewed = yield* registry.review(id, { status, note, at: yield* now })
    if (Option.isNone(reviewed)) return yield* new Conflict({ message: `The submission is already ${current.value.status}` })
    return reviewed.value
  })

  return { submit, submissions, allSubmissions, review }
}
