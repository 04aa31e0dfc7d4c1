import type { Capability } from "../domain/Capability.ts"

/** What each capability is, and the unit its price is quoted per (decisions §7). */
export const capabilityInfo: Readonly<Record<Capability, { readonly description: string; readonly per: string }>> = {
  reason: { description: "Language-model reasoning: a prompt in, a completion out", per: "1k_tokens" },
  search: { description: "Web search: a query in, ranked results out", per: "query" },
  read: { description: "Page reading: a URL in, the article's title, byline, text and Markdown out", per: "page" },
  scrape: { description: "Scraping: a URL in, its HTML, links and CSS-selected text out", per: "page" },
  execute: { description: "Sandboxed code execution: Python, JavaScript or Bash", per: "second" },
  imagine: { description: "Image generation from a prompt", per: "image" },
  speak: { description: "Speech synthesis: text in, audio out", per: "1k_chars" },
  transcribe: { description: "Speech recognition: audio in, text out", per: "second" },
  email: { description: "Sending an email", per: "message" },
  sms: { description: "Sending an SMS", per: "segment" },
  pay: { description: "Paying an L402 (Lightning) paywall: the invoice a URL asks, within maxSats, then the call", per: "invoice" }
}

/** `page` → `perPage`, `1k_chars` → `per1kChars`: the key of a flat price in the pricing object. */
export const priceKey = (per: string): string =>
  "per" + per.split("_").map((part) => part.charAt(0).toUpperCase() + part.slice(1)).join("")
