import { Schema } from "effect"

/** The ten capability names of the specification, in its order, then `pay` (L402 paywalls, docs/l402.md). */
export const capabilityNames = [
  "reason",
  "search",
  "read",
  "scrape",
  "execute",
  "imagine",
  "speak",
  "transcribe",
  "email",
  "sms",
  "pay"
] as const

export const Capability = Schema.Literals(capabilityNames)
export type Capability = typeof Capability.Type

export const isCapability = Schema.is(Capability)
