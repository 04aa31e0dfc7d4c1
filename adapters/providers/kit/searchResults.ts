/**
 * What the search adapters share once an upstream has answered: turning its
 * hits into `SearchOutput` results, cleaned, bounded and deduplicated.
 */
import type { SearchOutput } from "../../../src/capabilities/schemas.ts"
import { clip } from "./text.ts"

export const MAX_TITLE_CHARS = 500
export const MAX_SNIPPET_CHARS = 2000
export const MAX_URL_CHARS = 2048

export type SearchResult = SearchOutput["results"][number]

/** One hit as the upstream gave it, before any check. */
export interface Candidate {
  readonly title: unknown
  readonly url: unknown
  readonly snippet: unknown
}

/** An absolute http(s) URL without whitespace or control characters, within bounds. */
const httpUrl = (value: unknown): string | undefined => {
  if (typeof value !== "string") return undefined
  const text = value.trim()
  if (text === "" || text.length > MAX_URL_CHARS || /[\s\u0000-\u001f\u007f]/.test(text)) return undefined
  try {
    const url = new URL(text)
    return url.protocol === "http:" || url.protocol === "https:" ? text : undefined
  } catch {
    return undefined
  }
}

/**
 * The first `limit` usable results in the upstream's order: results without
 * a valid http(s) URL and repeated URLs are dropped, text is cleaned, made
 * one line and bounded, positions count from 1.
 */
export const normalize = (
  candidates: ReadonlyArray<Candidate>,
  limit: number,
  clean: (text: string) => string = (text) => text
): Array<SearchResult> => {
  const results: Array<SearchResult> = []
  const seen = new Set<string>()
  for (const candidate of candidates) {
    if (results.length >= limit) break
    const url = httpUrl(candidate.url)
    if (url === undefined || seen.has(url)) continue
    seen.add(url)
    const text = (value: unknown, max: number) => (typeof value === "string" ? clip(clean(value), max) : "")
    results.push({
      title: text(candidate.title, MAX_TITLE_CHARS),
      url,
      snippet: text(candidate.snippet, MAX_SNIPPET_CHARS),
      position: results.length + 1
    })
  }
  return results
}

/** What a JSON value is, for a message saying it is not what was expected. */
export const describe = (value: unknown): string =>
  value === undefined ? "missing" : value === null ? "null" : Array.isArray(value) ? "an array" : typeof value

/** The output of a search: the results found, their number as the total (no upstream here reports a useful one). */
export const searchOutput = (query: string, results: Array<SearchResult>): SearchOutput => ({
  results,
  query,
  totalResults: results.length
})
