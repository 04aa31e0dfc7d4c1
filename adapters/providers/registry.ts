/**
 * Every provider the gateway knows, in the order they are tried within a
 * capability. Each reads its own configuration (`fromConfig`: environment
 * variables and its price card) and says which upstream the proxy may reach
 * with the operator's credentials. Adding a provider is one adapter with its
 * `fromConfig` and one price card; then one line here.
 */
import * as Resend from "./email/resend.ts"
import * as Smtp from "./email/smtp.ts"
import * as Piston from "./execute/piston.ts"
import * as Sandbox from "./execute/sandboxConfig.ts"
import * as OpenAiImages from "./imagine/openaiImages.ts"
import type { ProviderConfig } from "./kit/config.ts"
import * as BuiltinRead from "./read/builtin.ts"
import * as Jina from "./read/jina.ts"
import * as Anthropic from "./reason/anthropic.ts"
import * as OpenAiCompatible from "./reason/openaiCompatible.ts"
import * as OpenAiEmbeddings from "./reason/openaiEmbeddings.ts"
import * as BuiltinScrape from "./scrape/builtin.ts"
import * as Firecrawl from "./scrape/firecrawl.ts"
import * as Brave from "./search/brave.ts"
import * as SearXNG from "./search/searxng.ts"
import * as Serper from "./search/serper.ts"
import * as Tavily from "./search/tavily.ts"
import * as Twilio from "./sms/twilio.ts"
import * as Espeak from "./speak/espeak.ts"
import * as OpenAiSpeech from "./speak/openaiSpeech.ts"
import * as OpenAiTranscribe from "./transcribe/openaiTranscribe.ts"

export const registry: ReadonlyArray<ProviderConfig> = [
  // reason: OpenAI, OpenRouter, Groq, a local server; Anthropic
  OpenAiCompatible.fromConfig,
  Anthropic.fromConfig,
  // embeddings (an upstream of the proxy, counted as reason)
  OpenAiEmbeddings.fromConfig,
  // search
  Brave.fromConfig,
  Tavily.fromConfig,
  SearXNG.fromConfig,
  Serper.fromConfig,
  // read, scrape
  BuiltinRead.fromConfig,
  Jina.fromConfig,
  BuiltinScrape.fromConfig,
  Firecrawl.fromConfig,
  // imagine, speak, transcribe
  OpenAiImages.fromConfig,
  OpenAiSpeech.fromConfig,
  OpenAiTranscribe.fromConfig,
  Espeak.fromConfig,
  // execute
  Sandbox.fromConfig,
  Piston.fromConfig,
  // email, sms
  Smtp.fromConfig,
  Resend.fromConfig,
  Twilio.fromConfig
]
