/**
 * The body length an HTTP answer declares (`Content-Length`), when it is a
 * plain whole number; undefined when absent or malformed (empty, signed,
 * fractional, absurdly long). A client reads exactly that many bytes or
 * fails, so an answer with a declared length within a bound can be read at
 * once; any other is read chunk by chunk against the bound.
 */
export const declaredLength = (headers: Readonly<Record<string, string | undefined>>): number | undefined => {
  const value = headers["content-length"]
  return value !== undefined && /^\d{1,15}$/.test(value) ? Number(value) : undefined
}
