import { lookup as dnsLookup } from "node:dns/promises"
import { isIP } from "node:net"
import { Data, Effect } from "effect"
import type { UnsafeUrl } from "../../src/ports/Net.ts"
import { classifyAddress } from "./addresses.ts"
import { describeError } from "./describeError.ts"
import { type CheckedUrl, unsafe } from "./urlPolicy.ts"

/**
 * Resolution: a name is resolved exactly once per hop (all A/AAAA answers);
 * every answer must be a public unicast address (or the host allow-listed),
 * and the hop then connects to the first answer, pinned.
 */

export type Lookup = (host: string) => Promise<ReadonlyArray<{ readonly address: string; readonly family: 4 | 6 }>>

/** All A and AAAA answers, in the resolver's order. */
export const systemLookup: Lookup = async (host) => {
  const answers = await dnsLookup(host, { all: true, order: "verbatim" })
  return answers.map((answer) => ({ address: answer.address, family: answer.family === 6 ? 6 : 4 }))
}

/** Where one hop connects: the URL as sent, and the checked IP the socket goes to. */
export interface Target {
  readonly url: URL
  readonly address: string
  /** Name for TLS SNI and certificate checks; undefined for IP-literal URLs. */
  readonly servername: string | undefined
}

export class ResolveFailed extends Data.TaggedError("ResolveFailed")<{ readonly host: string; readonly message: string }> {}

export const resolveTarget = (checked: CheckedUrl, lookup: Lookup): Effect.Effect<Target, UnsafeUrl | ResolveFailed> => {
  if (checked.address !== undefined) {
    return Effect.succeed({ url: checked.url, address: checked.address, servername: undefined })
  }
  return Effect.tryPromise({
    try: () => lookup(checked.host),
    catch: (cause) => new ResolveFailed({ host: checked.host, message: describeError(cause) })
  }).pipe(
    Effect.flatMap((answers): Effect.Effect<Target, UnsafeUrl | ResolveFailed> => {
      if (answers.length === 0) return Effect.fail(new ResolveFailed({ host: checked.host, message: "no addresses" }))
      for (const answer of answers) {
        const verdict = classifyAddress(answer.address)
        // Even an allow-listed name must resolve to IP literals: the connector
        // is handed the answer as is, and a name there would be resolved again.
        if (verdict === "not an IP address" || isIP(answer.address) === 0) {
          return Effect.fail(unsafe(checked.url.href, `${checked.host} resolved to "${answer.address}", not an IP address`))
        }
        if (!checked.allowListed && verdict !== "public") {
          return Effect.fail(
            unsafe(checked.url.href, `${checked.host} resolves to ${answer.address}, not a public address (${verdict})`)
          )
        }
      }
      return Effect.succeed({ url: checked.url, address: answers[0]!.address, servername: checked.host })
    })
  )
}
