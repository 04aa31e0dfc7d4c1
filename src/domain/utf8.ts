/**
 * The length in bytes of a string's UTF-8 encoding, as `TextEncoder` gives
 * it (a lone surrogate counts as U+FFFD, 3 bytes), counted without encoding:
 * quotes bound prompt tokens by it on every metered call, and encoding the
 * text only to read a length allocates a buffer the size of the prompt.
 */
export const utf8Length = (text: string): number => {
  let bytes = 0
  const length = text.length
  for (let i = 0; i < length; i++) {
    const unit = text.charCodeAt(i)
    if (unit < 0x80) bytes += 1
    else if (unit < 0x800) bytes += 2
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < length) {
      const next = text.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) {
        // A surrogate pair: one code point above U+FFFF, 4 bytes.
        bytes += 4
        i++
      } else {
        bytes += 3
      }
    } else {
      // The rest of the BMP, and a lone surrogate (encoded as U+FFFD).
      bytes += 3
    }
  }
  return bytes
}
