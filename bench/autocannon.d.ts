// The part of autocannon's programmatic API the HTTP benchmark uses (the package ships no types).
declare module "autocannon" {
  import type { EventEmitter } from "node:events"

  interface Options {
    readonly url: string
    readonly method?: string
    readonly connections?: number
    readonly duration?: number
    /** Milliseconds between samples; the run stops at the first one after `duration` (default 1000). */
    readonly sampleInt?: number
    readonly headers?: Record<string, string>
    readonly body?: string
    readonly requests?: ReadonlyArray<{
      readonly setupRequest?: (request: { headers: Record<string, string> }) => unknown
    }>
  }

  interface Result {
    readonly duration: number
    readonly errors: number
    readonly timeouts: number
    readonly non2xx: number
  }

  interface Instance extends EventEmitter, PromiseLike<Result> {}

  const autocannon: (options: Options) => Instance
  export default autocannon
}
