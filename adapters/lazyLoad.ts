/**
 * A lazy load (the dynamic import of an optional SDK, or what is built from
 * it), run by the first call and shared by every later one, unless it fails:
 * a failed load is forgotten, so the next call tries again instead of getting
 * the same failure for the life of the process (a module that could not be
 * read for a moment, a dependency installed after the server started).
 */
export const loadOnceUnlessFailed = <A>(load: () => Promise<A>): () => Promise<A> => {
  let pending: Promise<A> | undefined
  return () => {
    if (pending !== undefined) return pending
    // A load that throws before it returns a promise fails the same way.
    const attempt = new Promise<A>((resolve) => resolve(load()))
    pending = attempt
    attempt.catch(() => {
      if (pending === attempt) pending = undefined
    })
    return attempt
  }
}
