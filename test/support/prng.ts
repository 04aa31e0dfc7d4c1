/**
 * A small seeded PRNG (mulberry32) for the crash and simulation suites: the
 * same seed gives the same sequence, so a failing run replays exactly.
 */
export interface Prng {
  readonly seed: number
  /** Uniform in [0, 1). */
  readonly next: () => number
  /** Integer in [min, max], both inclusive. */
  readonly int: (min: number, max: number) => number
  readonly bigint: (min: bigint, max: bigint) => bigint
  /** True with probability p. */
  readonly chance: (p: number) => boolean
  readonly pick: <A>(items: ReadonlyArray<A>) => A
  /** Picks by weight: [[weight, value], ...]. */
  readonly weighted: <A>(items: ReadonlyArray<readonly [number, A]>) => A
  /** An independent generator derived from this one. */
  readonly fork: () => Prng
}

export const prng = (seed: number): Prng => {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1))
  const self: Prng = {
    seed,
    next,
    int,
    bigint: (min, max) => min + BigInt(Math.floor(next() * Number(max - min + 1n))),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)]!,
    weighted: (items) => {
      const total = items.reduce((sum, [w]) => sum + w, 0)
      let r = next() * total
      for (const [w, value] of items) {
        if (r < w) return value
        r -= w
      }
      return items[items.length - 1]![1]
    },
    fork: () => prng(int(0, 2 ** 31 - 1))
  }
  return self
}

/** The seed to run with: SEED_VAR from the environment when set, else a fresh one (printed by the caller). */
export const seedFrom = (variable: string): number => {
  const given = process.env[variable]
  if (given !== undefined && given !== "") return Number(given) >>> 0
  return Math.floor(Math.random() * 2 ** 31)
}
