/**
 * SMS segment counting, as carriers (and Twilio) count it; used to quote an
 * `sms` call before anything is sent.
 *
 * Encoding: a body is GSM-7 when every character is in the GSM 03.38 default
 * alphabet or its extension table; one character outside both makes the whole
 * body UCS-2 (counted in UTF-16 code units, so a character outside the Basic
 * Multilingual Plane, such as most emoji, takes two).
 *
 * Units: a basic GSM character is one septet; an extension character is two
 * (the escape and the character). A UCS-2 code unit is one unit.
 *
 * Segments: a body of at most 160 septets (GSM-7) or 70 units (UCS-2) is one
 * segment. A longer body is sent concatenated; the user-data header leaves
 * 153 septets or 67 units per segment, and a character is never split across
 * two segments: an escape pair that does not fit at the end of a segment
 * moves whole to the next, and so does a surrogate pair. An empty body is one
 * (empty) segment.
 */

export type SmsEncoding = "GSM-7" | "UCS-2"

export interface SegmentCount {
  readonly encoding: SmsEncoding
  readonly segments: number
  /** Septets (GSM-7) or UTF-16 code units (UCS-2) of the whole body. */
  readonly units: number
}

export const GSM_SINGLE_SEGMENT_SEPTETS = 160
export const GSM_CONCATENATED_SEGMENT_SEPTETS = 153
export const UCS2_SINGLE_SEGMENT_UNITS = 70
export const UCS2_CONCATENATED_SEGMENT_UNITS = 67

/** The GSM 03.38 default alphabet (one septet each); 0x1B, the escape to the extension table, is left out. */
const GSM_BASIC = new Set(
  "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?" +
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)

/** The GSM 03.38 default extension table (two septets each: escape + character); \f is the page break. */
const GSM_EXTENSION = new Set("\f^{}\\[~]|€")

/** Septets of one UTF-16 code unit in GSM-7, or undefined when it is not representable. */
const septetsOf = (unit: string): 1 | 2 | undefined =>
  GSM_BASIC.has(unit) ? 1 : GSM_EXTENSION.has(unit) ? 2 : undefined

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff
const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff

/**
 * Packs indivisible items (their sizes, in units) into segments of `perSegment`
 * units, an item that does not fit moving whole to the next segment.
 */
const pack = (sizes: ReadonlyArray<number>, perSegment: number): number => {
  let segments = 1
  let used = 0
  for (const size of sizes) {
    if (used + size > perSegment) {
      segments += 1
      used = 0
    }
    used += size
  }
  return segments
}

const count = (sizes: ReadonlyArray<number>, single: number, concatenated: number) => {
  const units = sizes.reduce((sum, size) => sum + size, 0)
  return { units, segments: units <= single ? 1 : pack(sizes, concatenated) }
}

/** Encoding, segments and units of an SMS body. */
export const countSegments = (body: string): SegmentCount => {
  // Every GSM character is a single UTF-16 code unit, so the body is walked by code unit.
  const septets: Array<number> = []
  let gsm = true
  for (let i = 0; i < body.length; i++) {
    const size = septetsOf(body[i]!)
    if (size === undefined) {
      gsm = false
      break
    }
    septets.push(size)
  }
  if (gsm) {
    return { encoding: "GSM-7", ...count(septets, GSM_SINGLE_SEGMENT_SEPTETS, GSM_CONCATENATED_SEGMENT_SEPTETS) }
  }
  // UCS-2: a surrogate pair is one indivisible item of two units; a lone surrogate is one unit.
  const units: Array<number> = []
  for (let i = 0; i < body.length; i++) {
    if (isHighSurrogate(body.charCodeAt(i)) && i + 1 < body.length && isLowSurrogate(body.charCodeAt(i + 1))) {
      units.push(2)
      i += 1
    } else {
      units.push(1)
    }
  }
  return { encoding: "UCS-2", ...count(units, UCS2_SINGLE_SEGMENT_UNITS, UCS2_CONCATENATED_SEGMENT_UNITS) }
}
