/**
 * Audio and text measures the speech and transcription adapters share: a
 * RIFF/WAVE header read (and its sizes fixed when a streaming writer left
 * placeholders), characters counted as code points, and the price of so many
 * characters per 1000.
 */
import { ceilDivide } from "../../../src/domain/Money.ts"

// ---------------------------------------------------------------------------
// WAV
// ---------------------------------------------------------------------------

export interface WavInfo {
  /** 1 PCM, 3 IEEE float, 0xFFFE extensible, … */
  readonly audioFormat: number
  readonly channels: number
  readonly sampleRate: number
  readonly bitsPerSample: number
  /** Bytes per frame: channels × bytes per sample. */
  readonly blockAlign: number
  /** Offset of the first sample byte. */
  readonly dataOffset: number
  /** The data chunk's size as its header declares it (streaming writers put a placeholder). */
  readonly declaredDataBytes: number
  /** Sample bytes actually present: the declared size, cut to what the buffer holds, in whole frames. */
  readonly dataBytes: number
  /** dataBytes / (sampleRate × blockAlign), in seconds. */
  readonly durationSeconds: number
}

/** Chunks walked at most before the data chunk; real files have a handful. */
const MAX_WAV_CHUNKS = 64

/**
 * Reads a RIFF/WAVE header: the `fmt ` chunk and where the `data` chunk
 * starts. Undefined when the bytes are not a WAV file this can measure.
 */
export const readWav = (bytes: Uint8Array): WavInfo | undefined => {
  if (bytes.byteLength < 12) return undefined
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const tag = (offset: number) => String.fromCharCode(bytes[offset]!, bytes[offset + 1]!, bytes[offset + 2]!, bytes[offset + 3]!)
  if (tag(0) !== "RIFF" || tag(8) !== "WAVE") return undefined
  let offset = 12
  let format: Omit<WavInfo, "dataOffset" | "declaredDataBytes" | "dataBytes" | "durationSeconds"> | undefined
  for (let i = 0; i < MAX_WAV_CHUNKS && offset + 8 <= bytes.byteLength; i++) {
    const id = tag(offset)
    const size = view.getUint32(offset + 4, true)
    const body = offset + 8
    if (id === "fmt ") {
      if (size < 16 || body + 16 > bytes.byteLength) return undefined
      const audioFormat = view.getUint16(body, true)
      const channels = view.getUint16(body + 2, true)
      const sampleRate = view.getUint32(body + 4, true)
      const blockAlign = view.getUint16(body + 12, true)
      const bitsPerSample = view.getUint16(body + 14, true)
      if (channels === 0 || sampleRate === 0 || bitsPerSample === 0) return undefined
      format = {
        audioFormat,
        channels,
        sampleRate,
        bitsPerSample,
        blockAlign: blockAlign > 0 ? blockAlign : channels * Math.ceil(bitsPerSample / 8)
      }
    } else if (id === "data") {
      if (format === undefined) return undefined
      const present = Math.min(size, bytes.byteLength - body)
      const dataBytes = present - (present % format.blockAlign)
      return {
        ...format,
        dataOffset: body,
        declaredDataBytes: size,
        dataBytes,
        durationSeconds: dataBytes / (format.sampleRate * format.blockAlign)
      }
    }
    offset = body + size + (size % 2)
  }
  return undefined
}

/**
 * The WAV with its RIFF and data sizes set to what is really there, when the
 * writer left placeholders (as eSpeak does on stdout) and the data chunk is
 * the last one; otherwise the bytes unchanged.
 */
export const withTrueSizes = (bytes: Uint8Array): Uint8Array => {
  const info = readWav(bytes)
  if (info === undefined) return bytes
  const end = info.dataOffset + info.dataBytes
  if (info.declaredDataBytes === info.dataBytes && bytes.byteLength >= end) return bytes
  const fixed = Buffer.from(bytes.subarray(0, end))
  fixed.writeUInt32LE(end - 8, 4)
  fixed.writeUInt32LE(info.dataBytes, info.dataOffset - 4)
  return fixed
}

// ---------------------------------------------------------------------------
// Pricing
// ---------------------------------------------------------------------------

/** Characters as Unicode code points: an emoji or a CJK character counts once. */
export const characterCount = (text: string): number => {
  let count = 0
  for (const _ of text) count++
  return count
}

/** ceil(characters × price per 1000 characters / 1000), in micro-dollars. */
export const priceOfCharacters = (characters: number, per1kMicroUsd: bigint): bigint =>
  ceilDivide(BigInt(characters) * per1kMicroUsd, 1000n)
