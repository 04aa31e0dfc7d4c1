import * as MemoryIdempotencyStore from "../../adapters/memory/MemoryIdempotencyStore.ts"
import { idempotencyStoreContract } from "./idempotency.contract.ts"

idempotencyStoreContract("memory", MemoryIdempotencyStore.layer)
