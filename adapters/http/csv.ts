/**
 * CSV as RFC 4180 writes it: fields separated by commas, records ended by
 * CRLF, a field quoted when it holds a comma, a double quote, CR or LF, and
 * a double quote inside a quoted field doubled.
 *
 * Spreadsheets run a cell that starts with `=`, `+`, `-` or `@` (and some
 * with a leading tab or carriage return) as a formula, so such a cell is
 * prefixed with an apostrophe (OWASP's advice against CSV injection): the
 * text stays readable and is never run. No number this project writes to a
 * CSV is negative, so no number is changed by it.
 */

const FORMULA_START = /^[=+\-@\t\r]/
const NEEDS_QUOTES = /[",\r\n]/

export type CsvValue = string | number | boolean | null | undefined

/** One field: null and undefined are empty; numbers as JavaScript writes them (as in the JSON). */
export const csvField = (value: CsvValue): string => {
  if (value === null || value === undefined) return ""
  let text = String(value)
  if (FORMULA_START.test(text)) text = `'${text}`
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll("\"", "\"\"")}"` : text
}

/** One record, CRLF included. */
export const csvRecord = (values: ReadonlyArray<CsvValue>): string => values.map(csvField).join(",") + "\r\n"
