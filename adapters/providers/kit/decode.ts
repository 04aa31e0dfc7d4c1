/**
 * Upstream payloads read through effect Schema: each adapter states the shape
 * of the answer it relies on as a schema, and an answer that does not have it
 * is a `malformed` failure naming the first field that is wrong. Fields the
 * adapter does not use are not looked at.
 */
import { Result, Schema } from "effect"
import type { ProviderFailure } from "../../../src/capabilities/Provider.ts"
import { clip, failure } from "./text.ts"

/**
 * A decoder of `schema` for `provider`'s answers: the decoded value, or a
 * `malformed` failure saying what is wrong where (secrets kept out).
 */
export const answerDecoder = <S extends Schema.ConstraintDecoder<unknown>>(schema: S) => {
  const decode = Schema.decodeUnknownResult(schema)
  return (provider: string, json: unknown, secrets: ReadonlyArray<string> = []): Result.Result<S["Type"], ProviderFailure> => {
    const decoded = decode(json, { errors: "first" })
    return Result.isSuccess(decoded)
      ? Result.succeed(decoded.success)
      : Result.fail(failure(provider, "malformed", `${provider}'s answer is not as documented: ${clip(decoded.failure.message, 200)}`, secrets))
  }
}

/** The value when `schema` decodes it, else undefined (for error bodies, read as best they can be). */
export const decodeOrUndefined = <S extends Schema.ConstraintDecoder<unknown>>(schema: S) => {
  const decode = Schema.decodeUnknownOption(schema)
  return (value: unknown): S["Type"] | undefined => {
    const decoded = decode(value)
    return decoded._tag === "Some" ? decoded.value : undefined
  }
}

/** A JSON string that is not empty (after trimming). */
export const NonEmptyText = Schema.String.check(Schema.makeFilter((text: string) => text.trim() !== "" || "empty text"))
