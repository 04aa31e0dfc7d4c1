/**
 * A fake of OpenAI's media APIs for tests: one real HTTP server on 127.0.0.1
 * (port 0) answering, as OpenAI's API reference documents them,
 *
 *   POST /v1/images/generations     JSON in, { created, data: [{ b64_json | url, revised_prompt }] } out
 *   POST /v1/audio/speech           JSON in, the audio bytes out (Content-Type per format)
 *   POST /v1/audio/transcriptions   multipart in, verbose_json out
 *   POST /v1/embeddings             JSON in, { object: "list", data: [{ object: "embedding", index, embedding }], model, usage } out
 *   GET  /files/{name}              a file set by the test (audio fetched by URL)
 *
 * with OpenAI's authentication check and error bodies. Every request is
 * recorded with its raw body bytes, its JSON or its parsed multipart form.
 * What the server does next is set by `behaviour`, which a test may change.
 * The official `openai` SDK is pointed at the same server by the tests, so
 * these payloads are the ones the real client library sends and parses.
 */
import { Effect } from "effect"
import * as Http from "node:http"
import type { AddressInfo, Socket } from "node:net"

// ---------------------------------------------------------------------------
// Media
// ---------------------------------------------------------------------------

/** A 1×1 PNG (red pixel). */
export const PNG_1X1 = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==",
  "base64"
)

/**
 * A 16-bit PCM WAV of a 440 Hz tone. `streamed`: the RIFF and data sizes are
 * the placeholders a streaming writer puts there (0xFFFFFFFF).
 */
export const toneWav = (
  options: { readonly seconds: number; readonly sampleRate?: number; readonly channels?: number; readonly streamed?: boolean }
): Buffer => {
  const sampleRate = options.sampleRate ?? 24_000
  const channels = options.channels ?? 1
  const frames = Math.round(options.seconds * sampleRate)
  const dataBytes = frames * channels * 2
  const wav = Buffer.alloc(44 + dataBytes)
  wav.write("RIFF", 0, "latin1")
  wav.writeUInt32LE(options.streamed === true ? 0xffffffff : 36 + dataBytes, 4)
  wav.write("WAVE", 8, "latin1")
  wav.write("fmt ", 12, "latin1")
  wav.writeUInt32LE(16, 16)
  wav.writeUInt16LE(1, 20)
  wav.writeUInt16LE(channels, 22)
  wav.writeUInt32LE(sampleRate, 24)
  wav.writeUInt32LE(sampleRate * channels * 2, 28)
  wav.writeUInt16LE(channels * 2, 32)
  wav.writeUInt16LE(16, 34)
  wav.write("data", 36, "latin1")
  wav.writeUInt32LE(options.streamed === true ? 0xffffffff : dataBytes, 40)
  for (let frame = 0; frame < frames; frame++) {
    const sample = Math.round(Math.sin((2 * Math.PI * 440 * frame) / sampleRate) * 8000)
    for (let c = 0; c < channels; c++) wav.writeInt16LE(sample, 44 + (frame * channels + c) * 2)
  }
  return wav
}

/** Bytes that start like an MP3 file (an ID3v2 tag, then MPEG frame headers). */
export const fakeMp3 = (bytes: number): Buffer => {
  const mp3 = Buffer.alloc(bytes, 0x55)
  Buffer.from("ID3\u0004\u0000\u0000\u0000\u0000\u0000\u0000", "latin1").copy(mp3, 0)
  for (let at = 10; at + 4 <= bytes; at += 418) Buffer.from([0xff, 0xfb, 0x90, 0x64]).copy(mp3, at)
  return mp3
}

export const SPEECH_CONTENT_TYPES: Readonly<Record<string, string>> = {
  mp3: "audio/mpeg",
  opus: "audio/opus",
  aac: "audio/aac",
  flac: "audio/flac",
  wav: "audio/wav",
  pcm: "audio/pcm"
}

// ---------------------------------------------------------------------------
// Documented payloads
// ---------------------------------------------------------------------------

/** OpenAI's error body. */
export const openAiError = (message: string, type: string, code: string | null, param: string | null = null) => ({
  error: { message, type, param, code }
})

export interface ImageReply {
  /** Images in the answer; default: as many as asked for. */
  readonly count?: number
  readonly revisedPrompt?: string | null
}

/** `POST /v1/images/generations` answer. */
export const imagesResponse = (request: Record<string, unknown>, reply: ImageReply = {}) => {
  const count = reply.count ?? (typeof request.n === "number" ? request.n : 1)
  const asUrl = request.response_format === "url"
  const revised = reply.revisedPrompt === undefined ? `A detailed rendering of: ${String(request.prompt)}` : reply.revisedPrompt
  return {
    created: 1_713_833_628,
    data: Array.from({ length: count }, (_, i) => ({
      ...(asUrl
        ? { url: `https://oaidalleapiprodscus.blob.core.windows.net/private/img-${i}.png?st=2024-04-23&sig=abc` }
        : { b64_json: PNG_1X1.toString("base64") }),
      ...(revised === null ? {} : { revised_prompt: revised })
    })),
    ...(request.model === "gpt-image-1"
      ? { usage: { total_tokens: 100, input_tokens: 50, output_tokens: 50, input_tokens_details: { text_tokens: 10, image_tokens: 40 } } }
      : {})
  }
}

/** The fake's embedding of input `index`: `dimensions` values, deterministic, exact in float32. */
export const fakeEmbedding = (index: number, dimensions: number): Array<number> =>
  Array.from({ length: dimensions }, (_, d) => ((index * 7 + d) % 16) / 16 - 0.5)

/** The fake's token count of one input: a string at four bytes a token (rounded up), token ids one each. */
export const fakeTokens = (input: unknown): number =>
  typeof input === "string" ? Math.ceil(Buffer.byteLength(input, "utf8") / 4) : Array.isArray(input) ? input.length : 0

/** `POST /v1/embeddings` answer: float arrays, or base64 of little-endian float32 with `encoding_format: "base64"`. */
export const embeddingsResponse = (request: Record<string, unknown>, usage?: { readonly promptTokens: number } | null) => {
  const raw = request.input
  const inputs: ReadonlyArray<unknown> = typeof raw === "string" || (Array.isArray(raw) && raw.every((x) => typeof x === "number"))
    ? [raw]
    : (raw as ReadonlyArray<unknown>)
  const dimensions = typeof request.dimensions === "number" ? request.dimensions : 1536
  const tokens = inputs.reduce((sum: number, input) => sum + fakeTokens(input), 0)
  return {
    object: "list",
    data: inputs.map((_, index) => {
      const vector = fakeEmbedding(index, dimensions)
      return {
        object: "embedding",
        index,
        embedding: request.encoding_format === "base64" ? Buffer.from(new Float32Array(vector).buffer).toString("base64") : vector
      }
    }),
    model: request.model,
    ...(usage === null ? {} : { usage: { prompt_tokens: usage?.promptTokens ?? tokens, total_tokens: usage?.promptTokens ?? tokens } })
  }
}

export interface TranscriptReply {
  readonly text?: string
  readonly language?: string
  readonly duration?: number | null
}

/** `POST /v1/audio/transcriptions` answer with `response_format: "verbose_json"`. */
export const verboseTranscript = (reply: TranscriptReply = {}) => {
  const text = reply.text ?? "The quick brown fox jumps over the lazy dog."
  const duration = reply.duration === undefined ? 3.52 : reply.duration
  return {
    task: "transcribe",
    language: reply.language ?? "english",
    ...(duration === null ? {} : { duration }),
    text,
    segments: [
      {
        id: 0,
        seek: 0,
        start: 0,
        end: duration ?? 0,
        text: ` ${text}`,
        tokens: [50364, 440, 1702, 3699, 283, 5230],
        temperature: 0,
        avg_logprob: -0.2860786020755768,
        compression_ratio: 1.2363636493682861,
        no_speech_prob: 0.00985979475080967
      }
    ],
    usage: { type: "duration", seconds: Math.ceil(duration ?? 0) }
  }
}

// ---------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------

export type Behaviour =
  /** The documented answer for the endpoint. */
  | {
    readonly _tag: "ok"
    readonly image?: ImageReply
    readonly transcript?: TranscriptReply
    readonly audio?: Buffer
    readonly audioType?: string
    /** The usage an embeddings answer reports; null: none; default: the fake's own count. */
    readonly embeddingUsage?: { readonly promptTokens: number } | null
  }
  /** Any status with a JSON body. */
  | { readonly _tag: "json"; readonly status: number; readonly body: unknown; readonly headers?: Record<string, string> }
  /** Any status with a raw body. */
  | { readonly _tag: "raw"; readonly status: number; readonly body: string | Buffer; readonly contentType: string }
  /** Accepts the request and never answers. */
  | { readonly _tag: "hang" }
  /** 200 and a body that never ends (no content-length), until the client goes away. */
  | { readonly _tag: "endless"; readonly contentType: string }
  /** 200 announcing a content-length of this many bytes, then hangs. */
  | { readonly _tag: "declared"; readonly bytes: number }

export interface Recorded {
  readonly method: string
  readonly path: string
  readonly headers: Http.IncomingHttpHeaders
  readonly raw: Buffer
  readonly json: unknown
  /** The parsed multipart body, when it was one. */
  readonly form: FormData | undefined
}

export interface Fake {
  /** http://127.0.0.1:{port} */
  readonly origin: string
  readonly requests: Array<Recorded>
  behaviour: Behaviour
  /** The Bearer key the API accepts; undefined: no auth (self-hosted). */
  apiKey: string | undefined
  /** Served at GET /files/{name}. */
  readonly files: Map<string, { readonly body: Buffer; readonly contentType: string }>
  /** Bytes written by the endless answer so far, and whether its client went away. */
  readonly endless: { sent: number; closed: boolean }
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

type Answer =
  | { readonly status: number; readonly body: unknown; readonly headers?: Record<string, string> }
  | { readonly status: number; readonly bytes: Buffer; readonly contentType: string }

const MAX_REQUEST_BYTES = 32 * 1024 * 1024

/** What OpenAI answers to a request that fails its checks; undefined when it passes. */
const refuse = (fake: Fake, recorded: Recorded): Answer | undefined => {
  const auth = recorded.headers.authorization
  if (fake.apiKey !== undefined && auth !== `Bearer ${fake.apiKey}`) {
    return {
      status: 401,
      body: auth === undefined
        ? openAiError(
          "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
          "invalid_request_error",
          null
        )
        : openAiError(
          "Incorrect API key provided: sk-wr***ng. You can find your API key at https://platform.openai.com/account/api-keys.",
          "invalid_request_error",
          "invalid_api_key"
        )
    }
  }
  const bad = (message: string, param: string | null = null) => ({
    status: 400,
    body: openAiError(message, "invalid_request_error", param === null ? null : "invalid_value", param)
  })
  if (recorded.path === "/v1/images/generations") {
    const json = recorded.json
    if (!isRecord(json)) return bad("We could not parse the JSON body of your request.")
    if (typeof json.prompt !== "string" || json.prompt === "") return bad("Missing required parameter: 'prompt'.", "prompt")
    if (json.model === "dall-e-3" && typeof json.n === "number" && json.n > 1) {
      return bad("You must provide n=1 for this model.", "n")
    }
    if (typeof json.model === "string" && json.model.startsWith("gpt-image") && "response_format" in json) {
      return bad("Unknown parameter: 'response_format'.", "response_format")
    }
    return undefined
  }
  if (recorded.path === "/v1/audio/speech") {
    const json = recorded.json
    if (!isRecord(json)) return bad("We could not parse the JSON body of your request.")
    if (typeof json.model !== "string") return bad("you must provide a model parameter")
    if (typeof json.input !== "string" || json.input === "") return bad("Missing required parameter: 'input'.", "input")
    if (typeof json.voice !== "string") return bad("Missing required parameter: 'voice'.", "voice")
    if (json.response_format !== undefined && !(String(json.response_format) in SPEECH_CONTENT_TYPES)) {
      return bad(`Invalid value: '${String(json.response_format)}'.`, "response_format")
    }
    return undefined
  }
  if (recorded.path === "/v1/embeddings") {
    const json = recorded.json
    if (!isRecord(json)) return bad("We could not parse the JSON body of your request.")
    if (typeof json.model !== "string") return bad("you must provide a model parameter")
    const input = json.input
    const valid = (typeof input === "string" && input !== "") ||
      (Array.isArray(input) && input.length > 0 && input.length <= 2048 &&
        (input.every((x) => typeof x === "string" && x !== "") || input.every((x) => Number.isInteger(x)) ||
          input.every((x) => Array.isArray(x) && x.length > 0 && x.every((t) => Number.isInteger(t)))))
    if (!valid) return bad("'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.", "input")
    if (json.encoding_format !== undefined && json.encoding_format !== "float" && json.encoding_format !== "base64") {
      return bad(`Invalid value: '${String(json.encoding_format)}'.`, "encoding_format")
    }
    return undefined
  }
  if (recorded.path === "/v1/audio/transcriptions") {
    const form = recorded.form
    if (form === undefined) return bad("Invalid Content-Type header (application/json), expected multipart/form-data.")
    const file = form.get("file")
    if (!(file instanceof Blob)) return bad("Missing required parameter: 'file'.", "file")
    if (typeof form.get("model") !== "string") return bad("you must provide a model parameter", "model")
    const name = (file as File).name ?? ""
    if (!/\.(flac|m4a|mp3|mp4|mpeg|mpga|oga|ogg|wav|webm)$/.test(name)) {
      return bad(
        "Invalid file format. Supported formats: ['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']",
        "file"
      )
    }
    return undefined
  }
  return { status: 404, body: openAiError(`Invalid URL (POST ${recorded.path})`, "invalid_request_error", null) }
}

const okAnswer = (recorded: Recorded, behaviour: Extract<Behaviour, { _tag: "ok" }>): Answer => {
  if (recorded.path === "/v1/images/generations") {
    return { status: 200, body: imagesResponse(recorded.json as Record<string, unknown>, behaviour.image) }
  }
  if (recorded.path === "/v1/embeddings") {
    return { status: 200, body: embeddingsResponse(recorded.json as Record<string, unknown>, behaviour.embeddingUsage) }
  }
  if (recorded.path === "/v1/audio/speech") {
    const format = String((recorded.json as Record<string, unknown>).response_format ?? "mp3")
    const audio = behaviour.audio ?? (format === "wav" ? toneWav({ seconds: 1.5, streamed: true }) : fakeMp3(4096))
    return { status: 200, bytes: audio, contentType: behaviour.audioType ?? SPEECH_CONTENT_TYPES[format] ?? "application/octet-stream" }
  }
  return { status: 200, body: verboseTranscript(behaviour.transcript) }
}

const send = (fake: Fake, res: Http.ServerResponse, recorded: Recorded) => {
  const behaviour = fake.behaviour
  const refusal = refuse(fake, recorded)
  if (refusal !== undefined) return write(res, refusal)
  switch (behaviour._tag) {
    case "ok":
      return write(res, okAnswer(recorded, behaviour))
    case "json":
      return write(res, { status: behaviour.status, body: behaviour.body, ...(behaviour.headers === undefined ? {} : { headers: behaviour.headers }) })
    case "raw":
      return write(res, { status: behaviour.status, bytes: Buffer.from(behaviour.body), contentType: behaviour.contentType })
    case "hang":
      return
    case "endless": {
      res.writeHead(200, { "content-type": behaviour.contentType })
      const chunk = Buffer.alloc(64 * 1024, 0x41)
      const pump = () => {
        while (!res.destroyed && fake.endless.sent < 1024 * 1024 * 1024) {
          fake.endless.sent += chunk.length
          if (!res.write(chunk)) return void res.once("drain", pump)
        }
      }
      res.on("close", () => {
        fake.endless.closed = true
      })
      pump()
      return
    }
    case "declared":
      res.writeHead(200, { "content-type": "application/json", "content-length": String(behaviour.bytes) })
      res.flushHeaders()
      return
  }
}

const write = (res: Http.ServerResponse, answer: Answer) => {
  if ("bytes" in answer) {
    res.writeHead(answer.status, { "content-type": answer.contentType, "content-length": String(answer.bytes.length) }).end(answer.bytes)
    return
  }
  const text = JSON.stringify(answer.body)
  res.writeHead(answer.status, {
    "content-type": "application/json",
    "x-request-id": "req_7d5f3e0a9b1c2d3e4f5a6b7c8d9e0f1a",
    ...answer.headers
  }).end(text)
}

const record = async (req: Http.IncomingMessage, raw: Buffer): Promise<Recorded> => {
  const url = new URL(req.url ?? "/", "http://127.0.0.1")
  const contentType = req.headers["content-type"] ?? ""
  let json: unknown = undefined
  let form: FormData | undefined
  if (contentType.startsWith("application/json")) {
    try {
      json = JSON.parse(raw.toString("utf8"))
    } catch {
      json = undefined
    }
  } else if (contentType.startsWith("multipart/form-data")) {
    try {
      form = await new Response(raw, { headers: { "content-type": contentType } }).formData()
    } catch {
      form = undefined
    }
  }
  return { method: req.method ?? "", path: url.pathname, headers: req.headers, raw, json, form }
}

/** Starts the fake for the scope; closing the scope closes every connection. */
export const startFake = (options: { readonly apiKey?: string | undefined; readonly behaviour?: Behaviour } = {}) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ fake: Fake; server: Http.Server; sockets: Set<Socket> }>((resolve, reject) => {
        const fake: Fake = {
          origin: "",
          requests: [],
          behaviour: options.behaviour ?? { _tag: "ok" },
          apiKey: options.apiKey,
          files: new Map(),
          endless: { sent: 0, closed: false }
        }
        const sockets = new Set<Socket>()
        const server = Http.createServer((req, res) => {
          res.on("error", () => {})
          const chunks: Array<Buffer> = []
          let size = 0
          req.on("data", (chunk: Buffer) => {
            size += chunk.length
            if (size <= MAX_REQUEST_BYTES) chunks.push(chunk)
          })
          req.on("end", () => {
            const raw = Buffer.concat(chunks)
            void record(req, raw).then((recorded) => {
              if (recorded.method === "GET" && recorded.path.startsWith("/files/")) {
                const file = fake.files.get(recorded.path.slice("/files/".length))
                if (file === undefined) return write(res, { status: 404, bytes: Buffer.from("not found"), contentType: "text/plain" })
                return write(res, { status: 200, bytes: file.body, contentType: file.contentType })
              }
              fake.requests.push(recorded)
              send(fake, res, recorded)
            })
          })
        })
        server.on("connection", (socket) => {
          sockets.add(socket)
          socket.on("close", () => sockets.delete(socket))
        })
        server.on("error", reject)
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          resolve({ fake: Object.assign(fake, { origin: `http://127.0.0.1:${port}` }), server, sockets })
        })
      })
    ),
    ({ server, sockets }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          for (const socket of sockets) socket.destroy()
          server.close(() => resolve())
        })
      )
  ).pipe(Effect.map(({ fake }) => fake))

/** The URL of a 127.0.0.1 port that was just free: connecting to it is refused. */
export const refusedOrigin: Effect.Effect<string> = Effect.promise(() =>
  new Promise<string>((resolve, reject) => {
    const server = Http.createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(`http://127.0.0.1:${port}`))
    })
  })
)
