import { Result } from "effect"
import type { AnyProvider } from "../../../src/capabilities/Provider.ts"
import type { ImagineInput, ImagineOutput, SpeakInput, TranscribeInput, TranscribeOutput } from "../../../src/capabilities/schemas.ts"
import { ImageSize } from "../../../src/capabilities/schemas.ts"
import type { Capability } from "../../../src/domain/Capability.ts"
import { NotFound, ValidationError } from "../../../src/domain/errors.ts"

/**
 * OpenAI's media requests mapped onto the capabilities `imagine`, `speak`
 * and `transcribe`, and their results back into OpenAI's answers. Pure: the
 * handlers (openaiHandlers.ts) run the mapped input through the capability
 * pipeline (provider choice, policy, caps, kill switch, hold, settle,
 * receipt), exactly as `POST /v1/capabilities/:capability` does.
 */

const invalid = (path: string, message: string) => new ValidationError({ message: `${path}: ${message}`, issues: [{ path, message }] })

/** The most images one imagine call may ask for (the capability's own limit). */
export const MAX_IMAGES_PER_CALL = 4

// ---- images ------------------------------------------------------------------

export interface ImageRequest {
  readonly prompt: string
  readonly model?: string | null | undefined
  readonly n?: number | null | undefined
  readonly size?: string | null | undefined
  readonly response_format?: "url" | "b64_json" | null | undefined
  readonly quality?: string | null | undefined
  readonly style?: string | null | undefined
}

/**
 * The imagine input of an image request. `n` goes to the provider in one
 * call (so one hold and one charge, metered by the images returned); above
 * what the capability takes (4) it is a 400 here, and above what the provider
 * makes per call (1 for dall-e-3) the provider's quote refuses it (400).
 * `size: "auto"` is the default size. `quality` may only be `auto` or
 * `standard` and `style` must be omitted: no configured provider takes them,
 * and a request for something else is refused rather than silently changed.
 * A `model` that no provider serves is 404 (the provider's quote).
 */
export const imagineInput = (request: ImageRequest): Result.Result<ImagineInput, ValidationError> => {
  const n = request.n ?? 1
  if (n > MAX_IMAGES_PER_CALL) return Result.fail(invalid("n", `at most ${MAX_IMAGES_PER_CALL} images per call`))
  const size = request.size ?? "auto"
  if (size !== "auto" && !(ImageSize.literals as ReadonlyArray<string>).includes(size)) {
    return Result.fail(invalid("size", `must be auto or one of ${ImageSize.literals.join(", ")}`))
  }
  const quality = request.quality ?? "auto"
  if (quality !== "auto" && quality !== "standard") return Result.fail(invalid("quality", "only auto or standard is supported"))
  if (request.style !== undefined && request.style !== null) return Result.fail(invalid("style", "is not supported"))
  return Result.succeed({
    prompt: request.prompt,
    n,
    ...(request.model === undefined || request.model === null ? {} : { model: request.model }),
    ...(size === "auto" ? {} : { size: size as ImagineInput["size"] & string }),
    ...(request.response_format === undefined || request.response_format === null ? {} : { responseFormat: request.response_format })
  })
}

/** OpenAI's `{ created, data }` answer. */
export const imagesAnswer = (output: ImagineOutput, createdSeconds: number) => ({
  created: createdSeconds,
  data: output.images.map((image) => ({
    ...(image.b64 !== undefined ? { b64_json: image.b64 } : { url: image.url }),
    ...(image.revisedPrompt === undefined ? {} : { revised_prompt: image.revisedPrompt })
  }))
})

// ---- choosing the provider a model names ---------------------------------------

/**
 * The provider a `model` names among those configured for `capability`: the
 * one of that name (e.g. `espeak`), else the first whose quote of `sample`
 * names that model (e.g. `tts-1`, `whisper-1`). Undefined: none does.
 */
export const providerForModel = (
  providers: ReadonlyArray<AnyProvider>,
  capability: Capability,
  model: string,
  sample: unknown
): AnyProvider | undefined => {
  const mine = providers.filter((p) => p.capability === capability)
  return mine.find((p) => p.name === model) ?? mine.find((p) => {
    const quoted = (p.quote as (input: unknown) => Result.Result<{ readonly model?: string | undefined }, unknown>)(sample)
    return Result.isSuccess(quoted) && quoted.success.model === model
  })
}

/**
 * The models the media routes answer to, for `GET /v1/models`: each
 * imagine, speak and transcribe provider's model (what its quote names),
 * or its name when it names none (eSpeak).
 */
export const mediaModels = (
  providers: ReadonlyArray<AnyProvider>
): ReadonlyArray<{ readonly id: string; readonly ownedBy: string; readonly capability: Capability }> =>
  providers.flatMap((p) => {
    const sample = p.capability === "imagine"
      ? { prompt: "a" }
      : p.capability === "speak"
      ? { text: "a" }
      : p.capability === "transcribe"
      ? PROBE_WAV
      : undefined
    if (sample === undefined) return []
    const quoted = (p.quote as (input: unknown) => Result.Result<{ readonly model?: string | undefined }, unknown>)(sample)
    const model = Result.isSuccess(quoted) ? quoted.success.model : undefined
    return [{ id: model ?? p.name, ownedBy: p.name, capability: p.capability }]
  })

/**
 * A capability's refusal with its field names as OpenAI's request has them
 * (e.g. `format` → `response_format`), so that `param` names a field the
 * caller sent. Other errors pass unchanged.
 */
export const inOpenAiTerms = (names: Readonly<Record<string, string>>) => <E>(error: E): E => {
  if (!(error instanceof ValidationError)) return error
  const rename = (path: string) => names[path] ?? path
  if (!error.issues.some((i) => names[i.path] !== undefined)) return error
  const issues = error.issues.map((i) => ({ path: rename(i.path), message: i.message }))
  const first = error.issues[0]
  const message = first !== undefined && error.message.startsWith(`${first.path}: `)
    ? `${rename(first.path)}: ${error.message.slice(first.path.length + 2)}`
    : error.message
  return new ValidationError({ message, issues }) as E
}

export const IMAGE_FIELDS = { responseFormat: "response_format" } as const
export const SPEECH_FIELDS = { format: "response_format", text: "input" } as const
export const TRANSCRIPTION_FIELDS = { audio: "file", mimeType: "file" } as const

export const unknownModel = (model: string, capability: Capability) =>
  new NotFound({ resource: `Model ${model.slice(0, 200)} for ${capability}` })

// ---- speech --------------------------------------------------------------------

/** OpenAI's built-in voices: a provider that has none of them (eSpeak) speaks in its default voice. */
export const OPENAI_VOICES: ReadonlySet<string> = new Set([
  "alloy", "ash", "ballad", "cedar", "coral", "echo", "fable", "marin", "nova", "onyx", "sage", "shimmer", "verse"
])

export interface SpeechRequest {
  readonly model: string
  readonly input: string
  readonly voice: string
  readonly response_format?: "mp3" | "opus" | "aac" | "flac" | "wav" | "pcm" | null | undefined
  readonly speed?: number | null | undefined
  readonly instructions?: string | null | undefined
  readonly stream_format?: "audio" | "sse" | null | undefined
}

/**
 * The speak input of a speech request for the provider its model names.
 * `response_format` omitted is mp3 (OpenAI's default) where the provider
 * makes mp3, else wav (eSpeak makes WAV only); aac and pcm are refused, as
 * no speak provider returns them. `speed` other than 1 and `instructions`
 * are refused, as is `stream_format: "sse"`. One of OpenAI's named voices that the provider does not take
 * is dropped (its default voice speaks); any other voice goes as given.
 */
export const speakInput = (provider: AnyProvider, request: SpeechRequest): Result.Result<SpeakInput, ValidationError> => {
  if (request.response_format === "aac" || request.response_format === "pcm") {
    return Result.fail(invalid("response_format", "aac and pcm are not supported; use mp3, opus, flac or wav"))
  }
  if (request.speed !== undefined && request.speed !== null && request.speed !== 1) {
    return Result.fail(invalid("speed", "only 1 is supported"))
  }
  if (request.instructions !== undefined && request.instructions !== null && request.instructions !== "") {
    return Result.fail(invalid("instructions", "is not supported"))
  }
  if (request.stream_format === "sse") return Result.fail(invalid("stream_format", "only audio is supported"))
  const quote = provider.quote as (input: SpeakInput) => Result.Result<unknown, unknown>
  const base: SpeakInput = { provider: provider.name, text: request.input }
  const format = request.response_format ?? (Result.isSuccess(quote({ ...base, format: "mp3" })) ? "mp3" : "wav")
  const withVoice: SpeakInput = { ...base, voice: request.voice, format }
  if (OPENAI_VOICES.has(request.voice) && Result.isFailure(quote(withVoice)) && Result.isSuccess(quote({ ...base, format }))) {
    return Result.succeed({ ...base, format })
  }
  return Result.succeed(withVoice)
}

// ---- transcription ---------------------------------------------------------------

/** The largest file taken: what the transcribe capability takes inline. */
export const MAX_TRANSCRIPTION_FILE_BYTES = 750_000

const TYPES_BY_EXTENSION: Readonly<Record<string, string>> = {
  wav: "audio/wav",
  mp3: "audio/mpeg",
  mpga: "audio/mpeg",
  mpeg: "audio/mpeg",
  m4a: "audio/mp4",
  mp4: "audio/mp4",
  webm: "audio/webm",
  ogg: "audio/ogg",
  oga: "audio/ogg",
  flac: "audio/flac"
}

/**
 * A WAV of one silent sample: what each transcribe provider is asked to
 * quote to learn the model it serves (see `providerForModel`), so that the
 * caller's own file, if unreadable, is refused by the provider it names.
 */
export const PROBE_WAV: TranscribeInput = (() => {
  const wav = Buffer.alloc(46)
  wav.write("RIFF", 0, "latin1")
  wav.writeUInt32LE(38, 4)
  wav.write("WAVEfmt ", 8, "latin1")
  wav.writeUInt32LE(16, 16)
  wav.writeUInt16LE(1, 20)
  wav.writeUInt16LE(1, 22)
  wav.writeUInt32LE(16_000, 24)
  wav.writeUInt32LE(32_000, 28)
  wav.writeUInt16LE(2, 32)
  wav.writeUInt16LE(16, 34)
  wav.write("data", 36, "latin1")
  wav.writeUInt32LE(2, 40)
  return { audio: wav.toString("base64"), mimeType: "audio/wav" }
})()

export type TranscriptionFormat = "json" | "text" | "verbose_json"

export interface TranscriptionForm {
  readonly model: string
  readonly input: TranscribeInput
  readonly format: TranscriptionFormat
}

const field = (form: FormData, name: string): Result.Result<string | undefined, ValidationError> => {
  const values = form.getAll(name)
  if (values.length === 0) return Result.succeed(undefined)
  if (values.length > 1) return Result.fail(invalid(name, "is given more than once"))
  const value = values[0]!
  if (typeof value !== "string") return Result.fail(invalid(name, "must be a text field, not a file"))
  if (value.length > 4096) return Result.fail(invalid(name, "is longer than 4096 characters"))
  if (value.includes("\u0000")) return Result.fail(invalid(name, "must not hold a NUL character"))
  return Result.succeed(value)
}

/**
 * Reads OpenAI's transcription form: `file` (required, 1 to 750000 bytes,
 * its type from its Content-Type or its name's extension), `model`
 * (required), `language` (2 to 16 characters), `response_format` (json,
 * text or verbose_json; srt and vtt are refused, no segments being kept),
 * `prompt` and `temperature` (checked, not forwarded: the transcribe
 * providers take neither), `timestamp_granularities[]` refused. Anything
 * else in the form is refused by name.
 */
export const transcriptionForm = async (form: FormData): Promise<Result.Result<TranscriptionForm, ValidationError>> => {
  const known = new Set(["file", "model", "language", "prompt", "response_format", "temperature", "stream"])
  for (const name of form.keys()) {
    if (!known.has(name)) return Result.fail(invalid(name.slice(0, 64), "is not supported"))
  }
  const files = form.getAll("file")
  if (files.length === 0) return Result.fail(invalid("file", "is required: the audio to transcribe"))
  if (files.length > 1) return Result.fail(invalid("file", "give one file"))
  const file = files[0]!
  if (typeof file === "string") return Result.fail(invalid("file", "must be a file part (with a filename), not a text field"))
  if (file.size === 0) return Result.fail(invalid("file", "is empty"))
  if (file.size > MAX_TRANSCRIPTION_FILE_BYTES) {
    return Result.fail(invalid("file", `is larger than ${MAX_TRANSCRIPTION_FILE_BYTES} bytes`))
  }
  const fields: Record<string, string | undefined> = {}
  for (const name of ["model", "language", "prompt", "response_format", "temperature", "stream"]) {
    const value = field(form, name)
    if (Result.isFailure(value)) return Result.fail(value.failure)
    fields[name] = value.success
  }
  const model = fields["model"]
  if (model === undefined || model === "") return Result.fail(invalid("model", "is required"))
  const format = fields["response_format"] ?? "json"
  if (format !== "json" && format !== "text" && format !== "verbose_json") {
    return Result.fail(invalid("response_format", "must be json, text or verbose_json"))
  }
  const language = fields["language"]
  if (language !== undefined && !/^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8}){0,2}$/.test(language)) {
    return Result.fail(invalid("language", "must be a language code such as en or en-US"))
  }
  const temperature = fields["temperature"]
  if (temperature !== undefined) {
    const value = Number(temperature)
    if (temperature.trim() === "" || !Number.isFinite(value) || value < 0 || value > 1) {
      return Result.fail(invalid("temperature", "must be a number from 0 to 1"))
    }
  }
  if (fields["stream"] !== undefined && fields["stream"] !== "false") return Result.fail(invalid("stream", "is not supported"))
  const name = (file as File).name ?? ""
  const extension = name.includes(".") ? name.slice(name.lastIndexOf(".") + 1).toLowerCase() : ""
  const declared = file.type.split(";")[0]!.trim().toLowerCase()
  const mimeType = declared.startsWith("audio/") || declared.startsWith("video/")
    ? declared
    : TYPES_BY_EXTENSION[extension]
  const bytes = Buffer.from(await file.arrayBuffer())
  return Result.succeed({
    model,
    format,
    input: {
      audio: bytes.toString("base64"),
      ...(mimeType === undefined ? {} : { mimeType }),
      ...(language === undefined ? {} : { language })
    }
  })
}

/** OpenAI's answer in the format asked for: an object, or the text itself. */
export const transcriptionAnswer = (output: TranscribeOutput, format: TranscriptionFormat): string | Record<string, unknown> => {
  if (format === "text") return output.text
  if (format === "json") return { text: output.text }
  return {
    task: "transcribe",
    language: output.language,
    duration: output.durationSeconds,
    text: output.text
  }
}
