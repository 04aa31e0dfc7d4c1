/**
 * Splitting the invoice stream (newline-delimited JSON) into lines, with
 * memory bounded whatever the server sends.
 */

export type Piece =
  | { readonly _tag: "Line"; readonly text: string }
  | { readonly _tag: "Invalid"; readonly reason: string }

/**
 * Splits a byte stream into lines incrementally. A line is kept only up to
 * `maxBytes`; a longer one is dropped as it arrives and reported once its
 * end is seen, so memory stays bounded whatever the server sends. A final
 * line without its newline (a cut connection) is discarded.
 */
export class LineSplitter {
  private parts: Array<Uint8Array> = []
  private size = 0
  private overlong = false
  private readonly decoder = new TextDecoder("utf-8", { fatal: true })
  readonly maxBytes: number

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes
  }

  push(chunk: Uint8Array): Array<Piece> {
    const pieces: Array<Piece> = []
    let start = 0
    for (;;) {
      const newline = chunk.indexOf(10, start)
      if (newline === -1) {
        this.append(chunk.subarray(start))
        return pieces
      }
      this.append(chunk.subarray(start, newline))
      pieces.push(this.take())
      start = newline + 1
    }
  }

  private append(bytes: Uint8Array) {
    if (bytes.length === 0) return
    this.size += bytes.length
    if (this.overlong) return
    if (this.size > this.maxBytes) {
      this.overlong = true
      this.parts = []
      return
    }
    // Copied: the chunk's buffer may be reused once this function returns.
    this.parts.push(bytes.slice())
  }

  private take(): Piece {
    let piece: Piece
    if (this.overlong) {
      piece = { _tag: "Invalid", reason: `a line of ${this.size} bytes (over ${this.maxBytes})` }
    } else {
      try {
        piece = { _tag: "Line", text: this.decoder.decode(Buffer.concat(this.parts, this.size)) }
      } catch {
        piece = { _tag: "Invalid", reason: "a line that is not UTF-8" }
      }
    }
    this.parts = []
    this.size = 0
    this.overlong = false
    return piece
  }
}
