/**
 * What the email adapters share: the operator's sender parsed, and the
 * subject made one header line.
 */
// ---------------------------------------------------------------------------
// Addresses and the subject

const ADDRESS = /^[^\s@<>()[\],;:"]+@[^\s@<>()[\],;:"]+\.[^\s@<>()[\],;:"]+$/
const CONTROL = /[\u0000-\u001f\u007f]/

export interface Sender {
  readonly name: string
  readonly address: string
}

/** `address` or `Display Name <address>`; undefined when it is neither, or carries control characters. */
export const parseSender = (text: string): Sender | undefined => {
  const trimmed = text.trim()
  if (trimmed === "" || trimmed.length > 320 + 200 || CONTROL.test(trimmed)) return undefined
  if (ADDRESS.test(trimmed) && trimmed.length <= 320) return { name: "", address: trimmed }
  const match = /^([^<>"]{0,200}?)\s*<([^<>]+)>$/.exec(trimmed)
  if (match === null) return undefined
  const address = match[2]!.trim()
  if (!ADDRESS.test(address) || address.length > 320) return undefined
  return { name: match[1]!.trim(), address }
}

/** The subject as one header line: every run of line breaks and control characters becomes one space. */
export const oneLineSubject = (subject: string): string => subject.replace(/[\u0000-\u001f\u007f]+/g, " ")
