import { Effect } from "effect"
import type { AccountId } from "../../src/domain/ids.ts"
import type { Invoice } from "../../src/domain/Invoice.ts"
import type { AuditRecord, Reservation, Transaction, Wallet } from "../../src/domain/Ledger.ts"
import { Store } from "../../src/ports/Store.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"

/**
 * The money invariants of one account, read straight from the store, for
 * the crash, simulation and fuzz suites. Returns the list of violations
 * (empty when the account adds up) together with what was read, so a
 * caller can check more.
 *
 * - no pocket is negative;
 * - each pocket = credits + refunds − charges − what open holds took
 *   (the transactions), and = the sum of the audit log's signed changes;
 * - every hold that ended took exactly what was charged plus what came back;
 * - no paid invoice is credited twice, and every paid invoice has exactly
 *   one credit transaction (its `transactionId`);
 * - every refund names a charge of the account, has exactly one `refund`
 *   audit record that moved the pockets by what it gave back, and the
 *   refunds of one charge never add up to more than the charge, in value or
 *   in either pocket;
 * - the audit hash chain verifies.
 */
export interface AccountSnapshot {
  readonly wallet: Wallet
  readonly transactions: ReadonlyArray<Transaction>
  readonly reservations: ReadonlyArray<Reservation>
  readonly audit: ReadonlyArray<AuditRecord>
  readonly invoices: ReadonlyArray<Invoice>
}

const PAGE = 500

const allPages = <A>(read: (offset: number) => Effect.Effect<{ readonly items: ReadonlyArray<A>; readonly total: number }>) =>
  Effect.gen(function*() {
    const out: Array<A> = []
    for (let offset = 0; ; offset += PAGE) {
      const page = yield* read(offset)
      out.push(...page.items)
      if (page.items.length < PAGE || out.length >= page.total) return out
    }
  })

export const snapshotAccount = (accountId: AccountId) =>
  Effect.gen(function*() {
    const store = yield* Store
    const wallet = yield* store.getWallet(accountId)
    const transactions = yield* allPages((offset) => store.listTransactions(accountId, {}, { limit: PAGE, offset }))
    const reservations = yield* allPages((offset) => store.listReservations(accountId, { limit: PAGE, offset }))
    const invoices = yield* allPages((offset) =>
      store.listInvoices(accountId, { now: new Date() }, { limit: PAGE, offset })
    )
    const audit: Array<AuditRecord> = []
    for (let after = 0n; ;) {
      const batch = yield* store.listAudit(accountId, after, 1000)
      audit.push(...batch)
      if (batch.length < 1000) break
      after = batch[batch.length - 1]!.seq
    }
    return { wallet, transactions, reservations, audit, invoices } satisfies AccountSnapshot
  })

export const accountViolations = (s: AccountSnapshot): Array<string> => {
  const problems: Array<string> = []
  const { wallet, transactions, reservations, audit, invoices } = s
  if (wallet.usdMicroUsd < 0n) problems.push(`usd pocket negative: ${wallet.usdMicroUsd}`)
  if (wallet.satsMsat < 0n) problems.push(`sats pocket negative: ${wallet.satsMsat}`)
  let usd = 0n
  let sats = 0n
  for (const t of transactions) {
    const sign = t.type === "charge" ? -1n : 1n
    usd += sign * t.usdMicroUsd
    sats += sign * t.satsMsat
  }
  for (const r of reservations) {
    if (r.status === "held") {
      usd -= r.heldUsdMicroUsd
      sats -= r.heldSatsMsat
    }
  }
  if (usd !== wallet.usdMicroUsd) problems.push(`usd pocket ${wallet.usdMicroUsd} != ledger ${usd}`)
  if (sats !== wallet.satsMsat) problems.push(`sats pocket ${wallet.satsMsat} != ledger ${sats}`)
  const auditUsd = audit.reduce((sum, r) => sum + r.usdDeltaMicroUsd, 0n)
  const auditSats = audit.reduce((sum, r) => sum + r.satsDeltaMsat, 0n)
  if (auditUsd !== wallet.usdMicroUsd) problems.push(`usd pocket ${wallet.usdMicroUsd} != audit ${auditUsd}`)
  if (auditSats !== wallet.satsMsat) problems.push(`sats pocket ${wallet.satsMsat} != audit ${auditSats}`)
  const txById = new Map(transactions.map((t) => [t.id, t]))
  for (const r of reservations) {
    const records = audit.filter((a) => a.reservationId === r.id)
    const kinds = records.map((a) => a.kind)
    if (kinds.filter((k) => k === "reserve").length !== 1) problems.push(`hold ${r.id}: ${kinds.join(",")}`)
    // A call that outlived its hold: the sweep's release, then at most one late settle
    // (a new debit, or an unpaid record that moves nothing). Otherwise exactly one ending.
    const isLate = (a: AuditRecord) => a.kind === "settle" && /"late":true/.test(a.details ?? "")
    const releases = records.filter((a) => a.kind === "release").length
    const lateSettles = records.filter(isLate).length
    const settles = records.filter((a) => a.kind === "settle" && !isLate(a)).length
    const ends = releases + settles
    if (r.status === "held" ? ends + lateSettles !== 0 : ends !== 1) problems.push(`hold ${r.id} (${r.status}) has ${ends} endings`)
    if (lateSettles > 1 || (lateSettles === 1 && releases !== 1)) {
      problems.push(`hold ${r.id}: ${lateSettles} late settles after ${releases} releases`)
    }
    if (r.status === "held") continue
    const charges = records.flatMap((a) => {
      const t = a.transactionId === null ? undefined : txById.get(a.transactionId)
      return t !== undefined && t.type === "charge" ? [t] : []
    })
    const returnedUsd = records.filter((a) => a.kind !== "reserve").reduce((sum, a) => sum + a.usdDeltaMicroUsd, 0n)
    const returnedSats = records.filter((a) => a.kind !== "reserve").reduce((sum, a) => sum + a.satsDeltaMsat, 0n)
    const chargedUsd = charges.reduce((sum, t) => sum + t.usdMicroUsd, 0n)
    const chargedSats = charges.reduce((sum, t) => sum + t.satsMsat, 0n)
    if (returnedUsd + chargedUsd !== r.heldUsdMicroUsd || returnedSats + chargedSats !== r.heldSatsMsat) {
      problems.push(`hold ${r.id}: took ${r.heldUsdMicroUsd}/${r.heldSatsMsat}, charged ${chargedUsd}/${chargedSats}, returned ${returnedUsd}/${returnedSats}`)
    }
    if ((r.status === "settled") !== (charges.length === 1) || charges.length > 1) {
      problems.push(`hold ${r.id} (${r.status}) has ${charges.length} charges`)
    }
    if (r.status === "settled" && (r.settledMicroUsd ?? 0n) > r.quotedMicroUsd) {
      problems.push(`hold ${r.id} settled ${r.settledMicroUsd} above its quote ${r.quotedMicroUsd}`)
    }
  }
  const refundTotals = new Map<string, { microUsd: bigint; usd: bigint; sats: bigint }>()
  for (const t of transactions) {
    const records = audit.filter((a) => a.transactionId === t.id)
    if (t.type !== "refund") {
      if (t.refundOf !== null) problems.push(`${t.type} ${t.id} names a charge it refunds`)
      if (records.some((a) => a.kind === "refund")) problems.push(`${t.type} ${t.id} has a refund audit record`)
      continue
    }
    const charge = t.refundOf === null ? undefined : txById.get(t.refundOf)
    if (charge === undefined || charge.type !== "charge") {
      problems.push(`refund ${t.id} of ${t.refundOf}: not a charge of the account`)
      continue
    }
    if (records.length !== 1 || records[0]!.kind !== "refund" || records[0]!.usdDeltaMicroUsd !== t.usdMicroUsd ||
      records[0]!.satsDeltaMsat !== t.satsMsat || records[0]!.amountMicroUsd !== t.amountMicroUsd) {
      problems.push(`refund ${t.id}: audit records ${records.map((a) => `${a.kind}:${a.usdDeltaMicroUsd}/${a.satsDeltaMsat}`).join(",")}`)
    }
    const sum = refundTotals.get(charge.id) ?? { microUsd: 0n, usd: 0n, sats: 0n }
    refundTotals.set(charge.id, { microUsd: sum.microUsd + t.amountMicroUsd, usd: sum.usd + t.usdMicroUsd, sats: sum.sats + t.satsMsat })
  }
  for (const [chargeId, sum] of refundTotals) {
    const charge = txById.get(chargeId)!
    if (sum.microUsd > charge.amountMicroUsd || sum.usd > charge.usdMicroUsd || sum.sats > charge.satsMsat) {
      problems.push(`charge ${chargeId} (${charge.amountMicroUsd}: ${charge.usdMicroUsd}/${charge.satsMsat}) refunded ${sum.microUsd}: ${sum.usd}/${sum.sats}`)
    }
  }
  const creditedBy = new Map<string, number>()
  for (const invoice of invoices) {
    if (invoice.status === "paid") {
      if (invoice.transactionId === null || !txById.has(invoice.transactionId)) {
        problems.push(`paid invoice ${invoice.id} has no credit transaction`)
      } else {
        creditedBy.set(invoice.transactionId, (creditedBy.get(invoice.transactionId) ?? 0) + 1)
        const t = txById.get(invoice.transactionId)!
        const expected = invoice.type === "lightning" ? t.satsMsat : t.usdMicroUsd
        const amount = invoice.type === "lightning" ? invoice.amountMsat : invoice.amountMicroUsd
        if (amount !== null && expected !== amount) problems.push(`invoice ${invoice.id} for ${amount} credited ${expected}`)
      }
    } else if (invoice.transactionId !== null) {
      problems.push(`invoice ${invoice.id} (${invoice.status}) has a credit`)
    }
  }
  for (const [tx, n] of creditedBy) if (n > 1) problems.push(`transaction ${tx} credits ${n} invoices`)
  // One credit per paid invoice: credits that name an invoice in their description are not counted on, the ids are.
  const credits = transactions.filter((t) => t.type === "credit")
  const invoiceCredits = credits.filter((t) => creditedBy.has(t.id)).length
  if (invoiceCredits !== invoices.filter((i) => i.status === "paid").length) {
    problems.push(`${invoiceCredits} invoice credits for ${invoices.filter((i) => i.status === "paid").length} paid invoices`)
  }
  return problems
}

/** Snapshot, invariants and the audit chain of one account; fails the effect with the list of violations. */
export const checkAccount = (accountId: AccountId) =>
  Effect.gen(function*() {
    const snapshot = yield* snapshotAccount(accountId)
    const problems = accountViolations(snapshot)
    const wallets = yield* Wallets
    const broken = yield* wallets.verifyChain(accountId)
    if (broken !== null) problems.push(`audit chain broken: ${JSON.stringify(broken, (_k, v) => typeof v === "bigint" ? v.toString() : v)}`)
    return { snapshot, problems }
  })
