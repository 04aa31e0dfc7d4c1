import { Context, type Effect, type Option } from "effect"
import type { AccountId, AgentId } from "../domain/ids.ts"

/**
 * What selling capabilities over L402 keeps (src/l402/Seller.ts): the
 * macaroon root key, the internal account the invoices credit, and how
 * many times each token has been used. Kept in the database (migration
 * 0016 on SQL), so that every server instance on one database shares them.
 */

export interface SalesAccount {
  readonly accountId: AccountId
  readonly agentId: AgentId
}

export interface TokenUse {
  /** 64 hex characters: the token id of the macaroon's identifier. */
  readonly tokenId: string
  readonly paymentHash: string
  /** The token's `calls` caveat: how many uses it allows in all. */
  readonly callsAllowed: number
  readonly at: Date
}

export class L402Store extends Context.Service<L402Store, {
  /**
   * The root key: `candidate` is stored if none is yet; the stored one is
   * returned either way (of two instances starting at once, one key wins).
   */
  readonly rootKey: (candidate: Uint8Array) => Effect.Effect<Uint8Array>
  readonly salesAccount: Effect.Effect<Option.Option<SalesAccount>>
  /** Records the sales account unless one is recorded; returns the recorded one. */
  readonly saveSalesAccount: (account: SalesAccount) => Effect.Effect<SalesAccount>
  /**
   * Counts one use of the token, atomically, unless `callsAllowed` uses are
   * already counted: true when this use was counted. Two concurrent uses of
   * a single-use token cannot both be counted.
   */
  readonly useToken: (use: TokenUse) => Effect.Effect<boolean>
  /** Gives back one counted use (the call it paid for did not run). */
  readonly returnUse: (tokenId: string) => Effect.Effect<void>
}>()("spendgate/L402Store") {}
