import { Layer } from "effect"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import { freshPostgresLayer } from "../support/postgres.ts"
import { storeContract } from "./store.contract.ts"

storeContract("PostgreSQL", storeOverClient.pipe(Layer.provide(freshPostgresLayer())))
