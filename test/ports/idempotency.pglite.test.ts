import { Layer } from "effect"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import { idempotencyStoreContract } from "./idempotency.contract.ts"

idempotencyStoreContract("PGlite", storeOverClient.pipe(Layer.provide(PgliteClient.layer({ dataDir: undefined }))))
