/**
 * The provider kit: what every provider adapter shares, so that an adapter
 * holds only what is its upstream's own (URL, request, answer schema, price).
 *
 * - text.ts: one-line clipping, secrets out of messages, `ProviderFailure`s;
 * - settings.ts: option checks and the one price checker (`checkUnitPrice`);
 * - exchange.ts: one bounded HTTP request and its failures, over the upstream
 *   client (adapters/net/upstreamClient.ts), re-exported as `UpstreamClient`;
 * - decode.ts: upstream answers and error bodies decoded with effect Schema;
 * - upstream.ts: the settings of an HTTP upstream, a provider priced per call;
 * - config.ts: what a provider's `fromConfig` reads (environment, price card) and returns;
 * - search.ts, searchResults.ts: a keyed search engine, and results normalized;
 * - reason.ts: models, quotes and reported usage of the reason adapters;
 * - media.ts, openaiMedia.ts: WAV headers and character prices; OpenAI's media APIs;
 * - email.ts: the sender and subject of the email adapters;
 * - page.ts, readPage.ts, scrapePage.ts, parse-pool.ts: fetched pages, read
 *   and scraped in a worker pool.
 *
 * This file re-exports the general parts; the others are imported by path.
 */
export * from "./decode.ts"
export * from "./exchange.ts"
export * from "./settings.ts"
export * from "./text.ts"
export * from "./upstream.ts"
