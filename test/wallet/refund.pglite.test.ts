import { Layer } from "effect"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import { refundContract } from "./refund.contract.ts"

refundContract("PGlite", () => storeOverClient.pipe(Layer.provide(PgliteClient.layer({ dataDir: undefined }))))
