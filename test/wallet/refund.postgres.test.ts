import { Layer } from "effect"
import { storeOverClient } from "../../adapters/sql/Database.ts"
import { freshPostgresLayer } from "../support/postgres.ts"
import { refundContract } from "./refund.contract.ts"

refundContract("PostgreSQL", () => storeOverClient.pipe(Layer.provide(freshPostgresLayer(20))))
