import { Layer, Option, Redacted } from "effect"
import * as Gateway from "../../src/Gateway.ts"
import { type AnyProvider } from "../../src/capabilities/Provider.ts"
import { Providers } from "../../src/capabilities/Capabilities.ts"
import { Funding } from "../../src/funding/Funding.ts"
import type { AdminStore } from "../../src/ports/AdminStore.ts"
import type { IdempotencyStore } from "../../src/ports/IdempotencyStore.ts"
import type { CardRail, LightningRail } from "../../src/ports/Rails.ts"
import { RateSource } from "../../src/ports/RateSource.ts"
import type { RegistryStore } from "../../src/ports/RegistryStore.ts"
import type { ServiceTransport } from "../../src/ports/ServiceTransport.ts"
import type { Store } from "../../src/ports/Store.ts"
import { Spend } from "../../src/wallet/Spend.ts"
import type { WebhookTransport } from "../../src/ports/WebhookTransport.ts"
import { Webhooks } from "../../src/webhooks/Webhooks.ts"
import * as MemoryStore from "../memory/MemoryStore.ts"
import { devRails } from "../rails/dev.ts"
import { registryOnly } from "../services/transport.ts"
import { storeLayer } from "../sql/Database.ts"
import type { LedgerOptions } from "../sql/SqlLedger.ts"

/**
 * Spendgate in one line per storage, for running the gateway inside your own
 * process (no HTTP server):
 *
 * - `Spendgate.memory()`: everything in memory, gone when the process ends;
 * - `Spendgate.pglite(dataDir)`: embedded PostgreSQL (PGlite) kept in
 *   `dataDir`, which is locked against a second process (`undefined`: an
 *   in-memory PGlite);
 * - `Spendgate.postgres(url)`: a PostgreSQL server.
 *
 * Each is a layer providing every core service (`Gateway.Services`) and the
 * storage ports, with nothing left to provide. The defaults: no capability
 * providers, the development payment rails (nothing leaves the machine), no
 * BTC/USD rate (the sats pocket cannot pay for calls), a proxy transport for
 * approved registry services only, and the background jobs a server runs
 * (the recovery sweep of expired holds, invoice expiry). Each can be
 * replaced through {@link Options}.
 *
 * Opening storage may fail (for PGlite: `DataDirInUse` when another process
 * holds `dataDir`; a SQL or migration error), which fails the layer.
 */

/** What a ready layer provides: the core services and the storage behind them. */
export type Provided = Gateway.Services | Store | AdminStore | IdempotencyStore | RegistryStore

export interface Options {
  /** Capability providers (default: none, so only your own `Spend` calls are metered). */
  readonly providers?: ReadonlyArray<AnyProvider>
  /** The Lightning and card rails (default: the development rails). */
  readonly rails?: Layer.Layer<LightningRail | CardRail>
  /** The BTC/USD rate (default `RateSource.none`). */
  readonly rates?: Layer.Layer<RateSource>
  /** How proxied service calls are sent (default: approved registry services only, no operator services). */
  readonly transport?: Layer.Layer<ServiceTransport>
  /** Base URL the development card rail puts in its checkout links (default `http://127.0.0.1:8080`). */
  readonly publicUrl?: string
  /**
   * How webhook deliveries are sent (default: none, so webhook endpoints
   * cannot be created); e.g. `WebhookHttp.layer({ allowHosts })` from
   * adapters/net/webhookTransport.ts, the rules of `read`.
   */
  readonly webhooks?: Layer.Layer<WebhookTransport>
  /** Run the recovery sweep of expired holds, invoice expiry and webhook delivery in the background (default `true`). */
  readonly background?: boolean
  /**
   * How SQL storage (`pglite`, `postgres`) groups holds and writes settles, as the server's
   * `SETTLE_DELAY_MS` and `RESERVE_FLIGHTS` set it: `settleDelayMs` (default 2),
   * `reserveFlights` (default 2), `maxQueued` (reserves that may wait for a call, default 256),
   * `settleRetryMaxPauseMs` (default 5000), `settleShutdownTimeoutMs` (default 10000).
   * `memory()` has none of these and ignores them.
   */
  readonly ledger?: LedgerOptions
}

type Storage<E> = Layer.Layer<Store | AdminStore | IdempotencyStore | RegistryStore, E>

/** Storage, the core on it, and the defaults for whatever `options` leaves out. */
const compose = <E>(storage: Storage<E>, dataDir: string | undefined, options: Options): Layer.Layer<Provided, E> => {
  const world = Layer.mergeAll(
    options.rates ?? RateSource.none,
    Providers.make(options.providers ?? []),
    options.transport ?? registryOnly,
    options.rails ?? devRails({ dataDir, publicUrl: options.publicUrl ?? "http://127.0.0.1:8080" }),
    options.webhooks ?? Layer.empty
  )
  const background = options.background === false
    ? Layer.empty
    : Layer.mergeAll(Spend.sweeper(), Funding.expirer(), Webhooks.worker())
  return background.pipe(
    Layer.provideMerge(Gateway.layer),
    Layer.provide(world),
    Layer.provideMerge(storage)
  )
}

/** Everything in memory: for tests, scripts and short-lived agents. */
export const memory = (options: Options = {}): Layer.Layer<Provided> => compose(MemoryStore.layer, undefined, options)

/**
 * Embedded PGlite kept in `dataDir` (created if missing, migrated on open,
 * locked against a second process); `undefined` keeps the database in memory.
 */
export const pglite = (dataDir: string | undefined, options: Options = {}): Layer.Layer<Provided, unknown> =>
  compose(storeLayer({ databaseUrl: Option.none(), dataDir }, options.ledger), dataDir, options)

/** A PostgreSQL server at `url` (`postgres://…`), migrated on open. */
export const postgres = (
  url: string | Redacted.Redacted<string>,
  options: Options & { readonly maxConnections?: number } = {}
): Layer.Layer<Provided, unknown> =>
  compose(
    storeLayer({
      databaseUrl: Option.some(typeof url === "string" ? Redacted.make(url) : url),
      dataDir: undefined,
      ...(options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections })
    }, options.ledger),
    undefined,
    options
  )
