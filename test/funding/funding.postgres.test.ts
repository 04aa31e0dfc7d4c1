import { Layer } from "effect"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import { freshPostgresLayer } from "../support/postgres.ts"
import { fundingContract } from "./funding.contract.ts"

fundingContract("PostgreSQL", () => storeOverClient.pipe(Layer.provide(freshPostgresLayer(20))))
