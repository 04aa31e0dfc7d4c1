/**
 * One agent's reservations in time order, with what each spends summed in a
 * Fenwick tree: the memory store's velocity window (the spend of the last
 * hour, the calls of the last minute) in O(log n) however many reservations
 * the agent has made, where walking them cost a hold O(n).
 *
 * Exact: the window is every reservation stamped after its start (those
 * stamped after `now` included, as the SQL store counts them), and each
 * reservation's spend is kept current as it is settled or released. A
 * reservation stamped before the last one (a call that waited for the
 * store's lock) is placed in order and the sums rebuilt; that is rare.
 */
import type { RecentActivity } from "../../src/ports/Store.ts"

interface Entry {
  readonly at: number
  readonly id: string
  readonly createdAt: Date
}

export interface Timeline {
  /** A new reservation and what it spends now (µUSD). */
  readonly add: (entry: Entry, spentMicroUsd: bigint) => void
  /** A reservation's spend changed (settled, released, settled late). */
  readonly update: (id: string, spentMicroUsd: bigint) => void
  /** The spend of the last hour and the calls of the last minute before `now`, and any stamped after it. */
  readonly recent: (now: Date) => RecentActivity
}

export const makeTimeline = (): Timeline => {
  const entries: Array<Entry> = []
  /** What each entry spends, µUSD. */
  const spentMicroUsd: Array<bigint> = []
  /** Fenwick tree over `spentMicroUsd`, 1-based: tree[i] sums positions (i - lowbit(i), i]. */
  let tree: Array<bigint> = [0n]
  const position = new Map<string, number>()

  const prefix = (count: number): bigint => {
    let sum = 0n
    for (let i = count; i > 0; i -= i & -i) sum += tree[i]!
    return sum
  }
  /** Appends the node of position `n` (1-based), the positions before it already in the tree. */
  const appendNode = (n: number, spent: bigint) => {
    let node = spent
    const start = n - (n & -n)
    for (let i = n - 1; i > start; i -= i & -i) node += tree[i]!
    tree[n] = node
  }
  const rebuild = () => {
    tree = [0n]
    position.clear()
    for (let i = 0; i < entries.length; i++) {
      appendNode(i + 1, spentMicroUsd[i]!)
      position.set(entries[i]!.id, i)
    }
  }
  /** The index of the first entry stamped after `after`. */
  const firstAfter = (after: number) => {
    let lo = 0
    let hi = entries.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (entries[mid]!.at > after) hi = mid
      else lo = mid + 1
    }
    return lo
  }

  return {
    add: (entry, spent) => {
      const last = entries[entries.length - 1]
      if (last === undefined || last.at <= entry.at) {
        entries.push(entry)
        spentMicroUsd.push(spent)
        position.set(entry.id, entries.length - 1)
        appendNode(entries.length, spent)
        return
      }
      // Stamped before the last: after every entry of the same time or earlier.
      const at = firstAfter(entry.at)
      entries.splice(at, 0, entry)
      spentMicroUsd.splice(at, 0, spent)
      rebuild()
    },
    update: (id, spent) => {
      const at = position.get(id)
      if (at === undefined) return
      const delta = spent - spentMicroUsd[at]!
      if (delta === 0n) return
      spentMicroUsd[at] = spent
      for (let i = at + 1; i <= entries.length; i += i & -i) tree[i] = tree[i]! + delta
    },
    recent: (now) => {
      const fromHour = firstAfter(now.getTime() - 60 * 60_000)
      const fromMinute = firstAfter(now.getTime() - 60_000)
      return {
        spentLastHourMicroUsd: prefix(entries.length) - prefix(fromHour),
        callsLastMinute: entries.length - fromMinute,
        oldestCallLastMinuteAt: entries[fromMinute]?.createdAt ?? null
      }
    }
  }
}
