/** A readable account of a Node/undici failure, following `cause` links. */
export const describeError = (error: unknown): string => {
  const parts: Array<string> = []
  let current: unknown = error
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code
    const text = typeof code === "string" && !current.message.includes(code) ? `${code}: ${current.message}` : current.message
    if (!parts.includes(text)) parts.push(text)
    current = (current as { cause?: unknown }).cause
  }
  return parts.length === 0 ? String(error) : parts.join(" (") + ")".repeat(parts.length - 1)
}
