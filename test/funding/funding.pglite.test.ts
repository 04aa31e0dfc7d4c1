import { Layer } from "effect"
import * as PgliteClient from "../../adapters/sql/PgliteClient.ts"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import { fundingContract } from "./funding.contract.ts"

fundingContract("PGlite", () => storeOverClient.pipe(Layer.provide(PgliteClient.layer({ dataDir: undefined }))))
