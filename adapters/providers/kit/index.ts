/**
 * The provider kit: what every provider adapter shares, so that an adapter
 * holds only what is its upstream's own (URL, request, answer schema, price).
 *
 * - text.ts: one-line clipping, secrets out of messages, `ProviderFailure`s;
 * - settings.ts: option checks and the one price checker (`checkUnitPrice`);
 * - exchange.ts: one bounded HTTP request and its failures;
 * - decode.ts: upstream answers decoded with effect Schema;
 * - upstream.ts: the settings of a keyed HTTP upstream, a provider priced per call;
 * - media.ts: WAV headers and character prices (speech, transcription);
 * - openaiMedia.ts: OpenAI's media APIs (images, speech, transcription);
 * - usage.ts: token usage of chat completions (reason);
 * - page.ts: fetched pages and their text (read, scrape);
 * - config.ts: what a provider's `fromConfig` is given and returns.
 */
export * from "./decode.ts"
export * from "./exchange.ts"
export * from "./settings.ts"
export * from "./text.ts"
export * from "./upstream.ts"
