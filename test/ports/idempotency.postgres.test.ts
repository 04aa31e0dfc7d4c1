import { Layer } from "effect"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import { freshPostgresLayer } from "../support/postgres.ts"
import { idempotencyStoreContract } from "./idempotency.contract.ts"

idempotencyStoreContract("PostgreSQL", storeOverClient.pipe(Layer.provide(freshPostgresLayer())))
