import { upstreamLayers } from "../support/upstreamLayers.ts"
import { ConfigProvider, Effect, Exit, Layer, Redacted, Scope } from "effect"
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as SafeHttp from "../../adapters/net/SafeHttp.ts"
import { loadProvidersConfig } from "../../adapters/providersConfig.ts"
import * as Transport from "../../adapters/services/transport.ts"
import * as OpenAiImages from "../../adapters/providers/imagine/openaiImages.ts"
import * as Espeak from "../../adapters/providers/speak/espeak.ts"
import * as OpenAiSpeech from "../../adapters/providers/speak/openaiSpeech.ts"
import * as OpenAiTranscribe from "../../adapters/providers/transcribe/openaiTranscribe.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import type { AccountId } from "../../src/domain/ids.ts"
import { Wallets } from "../../src/wallet/Wallets.ts"
import { type Fake, fakeEmbedding, fakeMp3, PNG_1X1, startFake, toneWav } from "../providers/fakeOpenAiMedia.ts"
import { client, type RunningServer, startServer, storeBackends } from "../support/server.ts"

/**
 * OpenAI's image, speech and transcription routes driven by the official
 * `openai` client (only `baseURL` and `apiKey` set) against a local server
 * speaking OpenAI's media API (test/providers/fakeOpenAiMedia.ts) and the
 * built-in eSpeak NG, and embeddings through the operator's OpenAI upstream
 * configured as in production (OPENAI_API_KEY, OPENAI_BASE_URL and the
 * shipped price cards): the requests the upstream receives, the answers in
 * OpenAI's shape, each call charged once in the ledger, and refusals as the
 * client's typed errors.
 */

const OPERATOR_KEY = "sk-operator-media-0123456789"

/** 20 cents an image at 1024x1024, 18 at 512x512. */
const IMAGE_PRICES = { "1024x1024": 200_000n, "512x512": 180_000n } as const
/** 1.5 cents per 1000 characters (both speak providers). */
const PER_1K_CHARS = { per: "1k_chars", priceMicroUsd: 15_000n } as const
/** 0.6 cents a minute: 100 µUSD a second. */
const PER_SECOND = { per: "second", priceMicroUsd: 100n } as const


for (const [backend, store] of storeBackends) {
  describe(`OpenAI-compatible media routes through the official client (${backend})`, () => {
    let scope: Scope.Closeable
    let fake: Fake
    let server: RunningServer
    let api: ReturnType<typeof client>

    beforeAll(async () => {
      scope = Effect.runSync(Scope.make())
      fake = await Effect.runPromise(Effect.provideService(startFake({ apiKey: OPERATOR_KEY }), Scope.Scope, scope))
      const baseUrl = `${fake.origin}/v1`
      const apiKey = Redacted.make(OPERATOR_KEY)
      // The HTTP client lives as long as the test's scope (its connection pool closes with it).
      const http = await Effect.runPromise(
        Layer.buildWithScope(Layer.mergeAll(upstreamLayers, SafeHttp.layer({ allowHosts: [] })), scope)
      )
      const built = await Effect.runPromise(
        Effect.all([
          OpenAiImages.make({ baseUrl, apiKey, model: "dall-e-2", prices: IMAGE_PRICES }),
          OpenAiSpeech.make({ baseUrl, apiKey, unitPrice: PER_1K_CHARS }),
          Espeak.make({ unitPrice: PER_1K_CHARS }),
          OpenAiTranscribe.make({ baseUrl, apiKey, unitPrice: PER_SECOND })
        ]).pipe(Effect.provideContext(http))
      )
      // The operator's upstreams as configured from the environment: chat and embeddings.
      const config = await Effect.runPromise(loadProvidersConfig.pipe(
        Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord({ OPENAI_API_KEY: OPERATOR_KEY, OPENAI_BASE_URL: baseUrl })))
      ))
      const transport = Transport.layer({ operatorServices: config.operatorServices }).pipe(Layer.provide(upstreamLayers))
      server = await startServer(store(), { providers: Providers.make(built), transport })
      api = client(server.baseUrl)
    })
    afterAll(async () => {
      await server?.close()
      if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
    })

    const funded = async (usdMicro = 10_000_000n) => {
      const signup = await api.post("/v1/signup", { name: "agent" })
      const { apiKey, accountId } = signup.body as { apiKey: string; accountId: string }
      if (usdMicro > 0n) {
        await server.run(Effect.gen(function*() {
          yield* (yield* Wallets).credit({ accountId: accountId as AccountId, key: `seed-${apiKey}`, pocket: "usd", amount: usdMicro, description: "seed" })
        }))
      }
      return { apiKey, accountId, openai: new OpenAI({ baseURL: `${server.baseUrl}/v1`, apiKey, maxRetries: 0 }) }
    }

    const charges = async (key: string) => {
      const listed = await api.get("/v1/wallet/transactions?limit=100", key)
      return (listed.body.transactions as Array<{ type: string; amountUsdCents: number; capability: string; provider: string }>)
        .filter((t) => t.type === "charge")
    }

    const policy = async (agent: { apiKey: string }, patch: Record<string, unknown>) => {
      const me = (await api.get("/v1/agents", agent.apiKey)).body.agents[0] as { id: string }
      expect((await api.patch(`/v1/agents/${me.id}/policy`, patch, agent.apiKey)).status).toBe(200)
    }

    // ---- images ----------------------------------------------------------------

    it("images.generate: n images in one upstream call, OpenAI's shape, charged once per image", async () => {
      const agent = await funded()
      const before = fake.requests.length
      const { data, response } = await agent.openai.images.generate({
        model: "dall-e-2",
        prompt: "a red pixel",
        n: 2,
        size: "512x512",
        response_format: "b64_json"
      }).withResponse()
      expect(fake.requests.length).toBe(before + 1)
      const sent = fake.requests.at(-1)!
      expect(sent.path).toBe("/v1/images/generations")
      expect(sent.headers.authorization).toBe(`Bearer ${OPERATOR_KEY}`)
      expect(sent.json).toEqual({ model: "dall-e-2", prompt: "a red pixel", n: 2, size: "512x512", response_format: "b64_json" })
      expect(typeof data.created).toBe("number")
      expect(data.data).toHaveLength(2)
      expect(Buffer.from(data.data![0]!.b64_json!, "base64")).toEqual(PNG_1X1)
      expect(data.data![0]!.revised_prompt).toBe("A detailed rendering of: a red pixel")
      expect(response.headers.get("x-spendgate-charged-usd-cents")).toBe("36")
      expect(response.headers.get("x-spendgate-quoted-usd-cents")).toBe("36")
      expect(response.headers.get("x-spendgate-audit-id")).toMatch(/.+/)
      expect(response.headers.get("x-spendgate-provider")).toBe("openai-images")
      const charged = await charges(agent.apiKey)
      expect(charged).toHaveLength(1)
      expect(charged[0]).toMatchObject({ amountUsdCents: 36, capability: "imagine" })
    })

    it("images.generate: a url answer, the default size for size auto", async () => {
      const agent = await funded()
      const { data } = await agent.openai.images.generate({ prompt: "a cat", response_format: "url", size: "auto" }).withResponse()
      expect(data.data![0]!.url).toMatch(/^https:\/\/oaidalleapiprodscus/)
      expect(fake.requests.at(-1)!.json).toEqual({ model: "dall-e-2", prompt: "a cat", n: 1, size: "1024x1024", response_format: "url" })
      expect((await charges(agent.apiKey)).map((c) => c.amountUsdCents)).toEqual([20])
    })

    it("images.generate: bad requests are BadRequestError naming the field, an unknown model NotFoundError; nothing sent or charged", async () => {
      const agent = await funded()
      const before = fake.requests.length
      const cases: Array<[Parameters<typeof agent.openai.images.generate>[0], string]> = [
        [{ prompt: "x", n: 5 }, "n"],
        [{ prompt: "x", size: "1536x1024" }, "size"],
        [{ prompt: "x", quality: "hd" }, "quality"],
        [{ prompt: "x", style: "vivid" }, "style"],
        [{ prompt: "" }, "prompt"]
      ]
      for (const [request, param] of cases) {
        const error = await agent.openai.images.generate(request).catch((e: unknown) => e)
        expect(error, param).toBeInstanceOf(OpenAI.BadRequestError)
        expect(error).toMatchObject({ status: 400, code: "VALIDATION_ERROR", type: "invalid_request_error", param })
      }
      const unknown = await agent.openai.images.generate({ prompt: "x", model: "dall-e-3" }).catch((e: unknown) => e)
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError)
      expect(fake.requests.length).toBe(before)
      expect(await charges(agent.apiKey)).toHaveLength(0)
    })

    it("an upstream refusal is BadRequestError-free 502 and nothing is charged", async () => {
      const agent = await funded()
      fake.behaviour = { _tag: "json", status: 400, body: { error: { message: "Your request was rejected by the safety system.", type: "invalid_request_error", code: "content_policy_violation", param: null } } }
      try {
        const error = await agent.openai.images.generate({ prompt: "x" }).catch((e: unknown) => e)
        expect(error).toBeInstanceOf(OpenAI.APIError)
        expect(error).toMatchObject({ code: "PROVIDER_ERROR", type: "api_error" })
      } finally {
        fake.behaviour = { _tag: "ok" }
      }
      expect((await charges(agent.apiKey)).every((c) => c.amountUsdCents === 0)).toBe(true)
    })

    // ---- speech ----------------------------------------------------------------

    it("audio.speech.create with tts-1: the upstream's audio bytes and type, charged per character once", async () => {
      const agent = await funded()
      const input = "Hello from the gateway."
      const response = await agent.openai.audio.speech.create({ model: "tts-1", input, voice: "alloy", response_format: "mp3" })
      expect(response.headers.get("content-type")).toBe("audio/mpeg")
      expect(Buffer.from(await response.arrayBuffer())).toEqual(fakeMp3(4096))
      const sent = fake.requests.at(-1)!
      expect(sent.path).toBe("/v1/audio/speech")
      expect(sent.json).toEqual({ model: "tts-1", input, voice: "alloy", response_format: "mp3" })
      // ceil(23 × 15000 / 1000) = 345 µUSD.
      expect(response.headers.get("x-spendgate-charged-usd-cents")).toBe("0.0345")
      expect(response.headers.get("x-spendgate-provider")).toBe("openai-speech")
      const charged = await charges(agent.apiKey)
      expect(charged).toHaveLength(1)
      expect(charged[0]).toMatchObject({ amountUsdCents: 0.0345, capability: "speak" })
    })

    it("audio.speech.create with the built-in espeak: a WAV of the text, an OpenAI voice name meaning the default voice", async () => {
      const agent = await funded()
      const before = fake.requests.length
      const response = await agent.openai.audio.speech.create({ model: "espeak", input: "Testing one two three.", voice: "alloy" })
      expect(response.headers.get("content-type")).toBe("audio/wav")
      const wav = Buffer.from(await response.arrayBuffer())
      expect(wav.toString("latin1", 0, 4)).toBe("RIFF")
      expect(wav.toString("latin1", 8, 12)).toBe("WAVE")
      expect(wav.readUInt32LE(40)).toBe(wav.length - 44)
      expect(wav.length).toBeGreaterThan(10_000)
      expect(response.headers.get("x-spendgate-provider")).toBe("espeak")
      const french = await agent.openai.audio.speech.create({ model: "espeak", input: "Bonjour.", voice: "fr", response_format: "wav" })
      expect(Buffer.from(await french.arrayBuffer()).toString("latin1", 0, 4)).toBe("RIFF")
      expect(fake.requests.length).toBe(before)
      // 22 × 15 and 8 × 15 µUSD.
      expect((await charges(agent.apiKey)).map((c) => [c.amountUsdCents, c.capability]).sort()).toEqual([[0.012, "speak"], [0.033, "speak"]])
    })

    it("audio.speech.create: unsupported format, speed, an unknown model and mp3 from espeak are 400/404, nothing charged", async () => {
      const agent = await funded()
      for (const [request, param] of [
        [{ model: "tts-1", input: "x", voice: "alloy", response_format: "aac" }, "response_format"],
        [{ model: "tts-1", input: "x", voice: "alloy", speed: 1.5 }, "speed"],
        [{ model: "tts-1", input: "x", voice: "alloy", stream_format: "sse" }, "stream_format"],
        [{ model: "espeak", input: "x", voice: "en", response_format: "mp3" }, "response_format"]
      ] as const) {
        const error = await agent.openai.audio.speech.create(request).catch((e: unknown) => e)
        expect(error, param).toBeInstanceOf(OpenAI.BadRequestError)
        expect(error).toMatchObject({ code: "VALIDATION_ERROR", param })
      }
      const unknown = await agent.openai.audio.speech.create({ model: "tts-9", input: "x", voice: "alloy" }).catch((e: unknown) => e)
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError)
      expect(await charges(agent.apiKey)).toHaveLength(0)
    })

    // ---- transcription ------------------------------------------------------------

    it("audio.transcriptions.create: the upload reaches the upstream as a form; json, text and verbose_json; charged per second once each", async () => {
      const agent = await funded()
      const wav = toneWav({ seconds: 5 })
      const { data, response } = await agent.openai.audio.transcriptions.create({
        file: await toFile(wav, "tone.wav", { type: "audio/wav" }),
        model: "whisper-1",
        language: "en",
        response_format: "json"
      }).withResponse()
      expect(data).toEqual({ text: "The quick brown fox jumps over the lazy dog." })
      const sent = fake.requests.at(-1)!
      expect(sent.path).toBe("/v1/audio/transcriptions")
      const file = sent.form!.get("file") as File
      expect(Buffer.from(await file.arrayBuffer())).toEqual(wav)
      expect(sent.form!.get("model")).toBe("whisper-1")
      expect(sent.form!.get("language")).toBe("en")
      // The upstream says 3.52 s: 4 s × 100 µUSD.
      expect(response.headers.get("x-spendgate-charged-usd-cents")).toBe("0.04")
      expect(response.headers.get("x-spendgate-quoted-usd-cents")).toBe("0.05")
      expect(response.headers.get("x-spendgate-provider")).toBe("openai-transcribe")
      const text = await agent.openai.audio.transcriptions.create({
        file: await toFile(wav, "tone.wav"),
        model: "whisper-1",
        response_format: "text"
      })
      expect(text).toBe("The quick brown fox jumps over the lazy dog.")
      const verbose = await agent.openai.audio.transcriptions.create({
        file: await toFile(wav, "tone.wav"),
        model: "whisper-1",
        response_format: "verbose_json"
      })
      expect(verbose).toMatchObject({ task: "transcribe", language: "english", duration: 3.52, text: "The quick brown fox jumps over the lazy dog." })
      const charged = await charges(agent.apiKey)
      expect(charged.map((c) => [c.amountUsdCents, c.capability])).toEqual([[0.04, "transcribe"], [0.04, "transcribe"], [0.04, "transcribe"]])
    })

    it("audio.transcriptions: a missing, empty, oversized or unreadable file, and a bad form, are 400 in OpenAI's shape; nothing sent or charged", async () => {
      const agent = await funded()
      const before = fake.requests.length
      const post = async (form: FormData | string, contentType?: string) => {
        const res = await fetch(`${server.baseUrl}/v1/audio/transcriptions`, {
          method: "POST",
          headers: { authorization: `Bearer ${agent.apiKey}`, ...(contentType === undefined ? {} : { "content-type": contentType }) },
          body: form
        })
        return { status: res.status, body: await res.json() as { error: { code: string; param: string | null; type: string; message: string } } }
      }
      const form = (parts: Record<string, string | Blob>) => {
        const f = new FormData()
        for (const [k, v] of Object.entries(parts)) v instanceof Blob ? f.append(k, v, `audio.${k === "file" ? "wav" : "bin"}`) : f.append(k, v)
        return f
      }
      const missing = await post(form({ model: "whisper-1" }))
      expect(missing).toMatchObject({ status: 400, body: { error: { code: "VALIDATION_ERROR", param: "file", type: "invalid_request_error" } } })
      expect((await post(form({ model: "whisper-1", file: new Blob([]) }))).body.error.param).toBe("file")
      expect((await post(form({ model: "whisper-1", file: new Blob([Buffer.alloc(750_001, 1)]) }))).body.error).toMatchObject({ param: "file" })
      const notAudio = new FormData()
      notAudio.append("model", "whisper-1")
      notAudio.append("file", new Blob([Buffer.from("just some text, not audio")], { type: "text/plain" }), "notes.txt")
      const unreadable = await post(notAudio)
      expect(unreadable).toMatchObject({ status: 400, body: { error: { code: "VALIDATION_ERROR", param: "file" } } })
      expect((await post(form({ file: new Blob([toneWav({ seconds: 1 })]) }))).body.error.param).toBe("model")
      expect((await post(form({ model: "whisper-1", file: new Blob([toneWav({ seconds: 1 })]), response_format: "srt" }))).body.error.param)
        .toBe("response_format")
      expect((await post(form({ model: "whisper-1", file: new Blob([toneWav({ seconds: 1 })]), language: "-v evil" }))).body.error.param)
        .toBe("language")
      const broken = await post("--x\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nno end", "multipart/form-data; boundary=x")
      expect(broken.status).toBe(400)
      expect(broken.body.error.code).toBe("VALIDATION_ERROR")
      const json = await post(JSON.stringify({ model: "whisper-1" }), "application/json")
      expect(json).toMatchObject({
        status: 415,
        body: { error: { code: "UNSUPPORTED_MEDIA_TYPE", type: "invalid_request_error", message: expect.stringContaining("multipart/form-data") } }
      })
      // Past the API's body limit (1 MiB): 413 before anything is read.
      const huge = await post(form({ model: "whisper-1", file: new Blob([Buffer.alloc(1_200_000, 1)]) }))
      expect(huge).toMatchObject({ status: 413, body: { error: { code: "PAYLOAD_TOO_LARGE" } } })
      const unknown = await agent.openai.audio.transcriptions.create({ file: await toFile(toneWav({ seconds: 1 }), "a.wav"), model: "whisper-9" })
        .catch((e: unknown) => e)
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError)
      expect(fake.requests.length).toBe(before)
      expect(await charges(agent.apiKey)).toHaveLength(0)
    })


    // ---- embeddings ------------------------------------------------------------------

    it("embeddings.create: routed by model to the operator's upstream, quoted at a byte a token, charged once from usage", async () => {
      const agent = await funded()
      const input = ["a".repeat(4000), "b".repeat(2000)]
      const { data, response } = await agent.openai.embeddings.create({ model: "text-embedding-3-small", input }).withResponse()
      const sent = fake.requests.at(-1)!
      expect(sent.path).toBe("/v1/embeddings")
      expect(sent.headers.authorization).toBe(`Bearer ${OPERATOR_KEY}`)
      // The client asks for base64 and decodes it itself.
      expect(sent.json).toEqual({ model: "text-embedding-3-small", input, encoding_format: "base64" })
      expect(data.data.map((d) => d.index)).toEqual([0, 1])
      expect(data.data[1]!.embedding).toEqual(fakeEmbedding(1, 1536))
      expect(data.usage).toEqual({ prompt_tokens: 1500, total_tokens: 1500 })
      // Quote: 6000 bytes × 20 µUSD / 1000 = 120 µUSD; charge: 1500 tokens × 20 / 1000 = 30 µUSD.
      expect(response.headers.get("x-spendgate-quoted-usd-cents")).toBe("0.012")
      expect(response.headers.get("x-spendgate-charged-usd-cents")).toBe("0.003")
      expect(response.headers.get("x-spendgate-audit-id")).toMatch(/.+/)
      expect(response.headers.get("x-spendgate-provider")).toBe("openai-embeddings")
      const charged = await charges(agent.apiKey)
      expect(charged).toHaveLength(1)
      expect(charged[0]).toMatchObject({ amountUsdCents: 0.003, capability: "reason" })
      expect((await api.get("/v1/wallet", agent.apiKey)).body.balanceUsdCents).toBe(1000 - 0.003)
    })

    it("embeddings.create: token ids, dimensions and float pass through; ids are quoted exactly; no usage is charged the quote", async () => {
      const agent = await funded()
      fake.behaviour = { _tag: "ok", embeddingUsage: null }
      try {
        const input = [Array.from({ length: 600 }, (_, i) => i), [7, 8, 9, 10]]
        const { data, response } = await agent.openai.embeddings.create({
          model: "openai-embeddings/text-embedding-3-large",
          input,
          dimensions: 8,
          encoding_format: "float"
        }).withResponse()
        expect(fake.requests.at(-1)!.json).toEqual({ model: "text-embedding-3-large", input, dimensions: 8, encoding_format: "float" })
        expect(data.data[1]!.embedding).toEqual(fakeEmbedding(1, 8))
        // 604 ids × 130 µUSD / 1000 = 78.52, rounded up: 79 µUSD.
        expect(response.headers.get("x-spendgate-quoted-usd-cents")).toBe("0.0079")
        expect(response.headers.get("x-spendgate-charged-usd-cents")).toBe("0.0079")
      } finally {
        fake.behaviour = { _tag: "ok" }
      }
      expect((await charges(agent.apiKey)).map((c) => c.amountUsdCents)).toEqual([0.0079])
    })

    it("embeddings.create: bad input is BadRequestError naming the field, an unknown model NotFoundError; nothing sent or charged", async () => {
      const agent = await funded()
      const before = fake.requests.length
      const cases: Array<[OpenAI.EmbeddingCreateParams, RegExp]> = [
        [{ model: "text-embedding-3-small", input: [] }, /^input/],
        [{ model: "text-embedding-3-small", input: "" }, /^input/],
        [{ model: "text-embedding-3-small", input: ["ok", ""] }, /^input/],
        [{ model: "text-embedding-3-small", input: [[1, 2], []] }, /^input/],
        [{ model: "text-embedding-3-small", input: "x", dimensions: 5000 }, /dimensions$/]
      ]
      for (const [request, param] of cases) {
        const error = await agent.openai.embeddings.create(request).catch((e: unknown) => e)
        expect(error, JSON.stringify(request)).toBeInstanceOf(OpenAI.BadRequestError)
        expect(error).toMatchObject({ status: 400, code: "VALIDATION_ERROR", param: expect.stringMatching(param) })
      }
      const unknown = await agent.openai.embeddings.create({ model: "text-embedding-9", input: "x" }).catch((e: unknown) => e)
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError)
      expect(fake.requests.length).toBe(before)
      expect(await charges(agent.apiKey)).toHaveLength(0)
    })

    it("embeddings.create over the per-call cap is an APIError with status 402; nothing sent", async () => {
      const agent = await funded()
      await policy(agent, { maxPerCallUsdCents: 0.01 })
      const before = fake.requests.length
      // 8000 bytes: 160 µUSD = 0.016 cents, over 0.01.
      const error = await agent.openai.embeddings.create({ model: "text-embedding-3-small", input: "a".repeat(8000) }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.APIError)
      expect(error).toMatchObject({ status: 402, code: "PER_CALL_LIMIT_EXCEEDED" })
      expect(fake.requests.length).toBe(before)
      expect(await charges(agent.apiKey)).toHaveLength(0)
    })

    it("models.list: chat and embedding models with reason, each media model with its capability", async () => {
      const agent = await funded()
      const ids = (await agent.openai.models.list()).data.map((m) => m.id)
      for (const id of ["gpt-4o-mini", "openai/gpt-4o-mini", "text-embedding-3-small", "openai-embeddings/text-embedding-3-large", "dall-e-2", "tts-1", "espeak", "whisper-1"]) {
        expect(ids).toContain(id)
      }
      expect(new Set(ids).size).toBe(ids.length)
      await policy(agent, { allowedCapabilities: ["speak", "transcribe"] })
      const listed = (await agent.openai.models.list()).data
      expect(listed.map((m) => m.id)).toEqual(["tts-1", "espeak", "whisper-1"])
      expect(listed[0]).toEqual({ id: "tts-1", object: "model", created: 0, owned_by: "openai-speech" })
    })

    // ---- refusals as the SDK's typed errors ------------------------------------------

    it("a killed agent is PermissionDeniedError on every media route; nothing reaches the upstream or is charged", async () => {
      const owner = await funded()
      const worker = (await api.post("/v1/agents", { name: "worker" }, owner.apiKey)).body as { id: string; apiKey: string }
      expect((await api.patch(`/v1/agents/${worker.id}`, { killed: true }, owner.apiKey)).status).toBe(200)
      const openai = new OpenAI({ baseURL: `${server.baseUrl}/v1`, apiKey: worker.apiKey, maxRetries: 0 })
      const before = fake.requests.length
      for (const call of [
        () => openai.images.generate({ prompt: "x" }),
        () => openai.embeddings.create({ model: "text-embedding-3-small", input: "x" }),
        () => openai.audio.speech.create({ model: "espeak", input: "x", voice: "en" }),
        async () => openai.audio.transcriptions.create({ file: await toFile(toneWav({ seconds: 1 }), "a.wav"), model: "whisper-1" })
      ]) {
        const error = await call().catch((e: unknown) => e)
        expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError)
        expect(error).toMatchObject({ status: 403, code: "AGENT_KILLED", type: "permission_error" })
      }
      expect(fake.requests.length).toBe(before)
      expect(await charges(owner.apiKey)).toHaveLength(0)
    })

    it("an over-cap call is an APIError with status 402; nothing sent or charged", async () => {
      const agent = await funded()
      await policy(agent, { maxPerCallUsdCents: 10 })
      const before = fake.requests.length
      const error = await agent.openai.images.generate({ prompt: "x" }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.APIError)
      expect(error).toMatchObject({ status: 402, code: "PER_CALL_LIMIT_EXCEEDED", type: "insufficient_quota" })
      expect(fake.requests.length).toBe(before)
      expect(await charges(agent.apiKey)).toHaveLength(0)
    })

    it("an empty wallet is an APIError with status 402 INSUFFICIENT_BALANCE on every media route", async () => {
      const agent = await funded(0n)
      const before = fake.requests.length
      for (const call of [
        () => agent.openai.images.generate({ prompt: "x" }),
        () => agent.openai.embeddings.create({ model: "text-embedding-3-small", input: "x" }),
        () => agent.openai.audio.speech.create({ model: "tts-1", input: "x", voice: "alloy" }),
        async () => agent.openai.audio.transcriptions.create({ file: await toFile(toneWav({ seconds: 1 }), "a.wav"), model: "whisper-1" })
      ]) {
        const error = await call().catch((e: unknown) => e)
        expect(error).toBeInstanceOf(OpenAI.APIError)
        expect(error).toMatchObject({ status: 402, code: "INSUFFICIENT_BALANCE", type: "insufficient_quota" })
      }
      expect(fake.requests.length).toBe(before)
    })

    it("a capability the policy leaves out is PermissionDeniedError CAPABILITY_NOT_ALLOWED", async () => {
      const agent = await funded()
      await policy(agent, { allowedCapabilities: ["speak"] })
      for (const call of [
        () => agent.openai.images.generate({ prompt: "x" }),
        () => agent.openai.embeddings.create({ model: "text-embedding-3-small", input: "x" }),
        async () => agent.openai.audio.transcriptions.create({ file: await toFile(toneWav({ seconds: 1 }), "a.wav"), model: "whisper-1" })
      ]) {
        const error = await call().catch((e: unknown) => e)
        expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError)
        expect(error).toMatchObject({ status: 403, code: "CAPABILITY_NOT_ALLOWED", type: "permission_error" })
      }
      const allowed = await agent.openai.audio.speech.create({ model: "espeak", input: "ok", voice: "en" })
      expect(allowed.status).toBe(200)
      expect((await charges(agent.apiKey)).map((c) => c.capability)).toEqual(["speak"])
    })
  })
}


