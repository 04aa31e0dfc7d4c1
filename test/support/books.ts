import { Layer, ManagedRuntime, Option, Redacted } from "effect"
import { devRails } from "../../adapters/rails/dev.ts"
import { registryOnly } from "../../adapters/services/transport.ts"
import { storeLayer } from "../../adapters/sql/Database.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import * as Gateway from "../../src/Gateway.ts"
import { RateSource } from "../../src/ports/RateSource.ts"

/**
 * The gateway over the storage a server process used (PostgreSQL when a URL
 * is given, else the PGlite data directory), opened by a test once that
 * process has stopped or been killed: to read its books and run its sweeps.
 */
export const openBooks = (databaseUrl: string | undefined, dataDir: string | undefined) =>
  ManagedRuntime.make(
    Gateway.layer.pipe(
      Layer.provideMerge(storeLayer({
        databaseUrl: databaseUrl === undefined ? Option.none() : Option.some(Redacted.make(databaseUrl)),
        dataDir
      })),
      Layer.provideMerge(Layer.mergeAll(
        RateSource.none,
        Providers.make([]),
        registryOnly,
        devRails({ dataDir: undefined, publicUrl: "http://spendgate.test" })
      ))
    )
  )
