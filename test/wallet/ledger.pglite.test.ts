import { Layer } from "effect"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import { ledgerContract } from "./ledger.contract.ts"

ledgerContract("PGlite", () => storeOverClient.pipe(Layer.provide(PgliteClient.layer({ dataDir: undefined }))))
