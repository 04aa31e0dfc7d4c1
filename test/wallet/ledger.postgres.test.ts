import { Layer } from "effect"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import { freshPostgresLayer } from "../support/postgres.ts"
import { ledgerContract } from "./ledger.contract.ts"

ledgerContract("PostgreSQL", () => storeOverClient.pipe(Layer.provide(freshPostgresLayer(20))))
