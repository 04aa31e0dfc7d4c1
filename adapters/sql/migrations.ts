import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Schema migrations, PostgreSQL dialect, run unchanged on a PostgreSQL server
 * and on embedded PGlite. Append new numbered entries; never edit a shipped one.
 *
 * Amounts are BIGINT in micro-dollars / millisatoshis (docs/money.md).
 */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_accounts_agents": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`
      CREATE TABLE accounts (
        id          TEXT PRIMARY KEY,
        created_at  TIMESTAMPTZ NOT NULL
      )`
    yield* sql`
      CREATE TABLE agents (
        id                       TEXT PRIMARY KEY,
        account_id               TEXT NOT NULL REFERENCES accounts (id),
        name                     TEXT NOT NULL,
        role                     TEXT NOT NULL CHECK (role IN ('owner', 'agent')),
        killed                   BOOLEAN NOT NULL DEFAULT FALSE,
        key_hash                 TEXT NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
        created_at               TIMESTAMPTZ NOT NULL,
        last_active_at           TIMESTAMPTZ,
        max_per_call_micro_usd   BIGINT CHECK (max_per_call_micro_usd > 0),
        max_per_day_micro_usd    BIGINT CHECK (max_per_day_micro_usd > 0),
        allowed_capabilities     TEXT NOT NULL DEFAULT ''
      )`
    yield* sql`CREATE INDEX agents_account_created ON agents (account_id, created_at DESC, id DESC)`
  }),
  "0002_wallet_ledger": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // One wallet per account, two pockets that can never go negative. The
    // audit chain head lives on the wallet row, which every ledger write locks.
    yield* sql`
      CREATE TABLE wallets (
        account_id   TEXT PRIMARY KEY REFERENCES accounts (id),
        usd_micro    BIGINT NOT NULL DEFAULT 0 CHECK (usd_micro >= 0),
        sats_msat    BIGINT NOT NULL DEFAULT 0 CHECK (sats_msat >= 0),
        audit_seq    BIGINT NOT NULL DEFAULT 0,
        audit_head   TEXT NOT NULL DEFAULT '0000000000000000000000000000000000000000000000000000000000000000'
      )`
    yield* sql`INSERT INTO wallets (account_id) SELECT id FROM accounts`
    yield* sql`
      CREATE TABLE reservations (
        id                      TEXT PRIMARY KEY,
        account_id              TEXT NOT NULL REFERENCES accounts (id),
        agent_id                TEXT NOT NULL REFERENCES agents (id),
        capability              TEXT NOT NULL,
        provider                TEXT NOT NULL,
        quoted_micro_usd        BIGINT NOT NULL CHECK (quoted_micro_usd >= 0),
        held_usd_micro          BIGINT NOT NULL CHECK (held_usd_micro >= 0),
        held_sats_msat          BIGINT NOT NULL CHECK (held_sats_msat >= 0),
        rate_micro_usd_per_btc  BIGINT CHECK (rate_micro_usd_per_btc > 0),
        day                     TEXT NOT NULL,
        status                  TEXT NOT NULL CHECK (status IN ('held', 'settled', 'released')),
        settled_micro_usd       BIGINT CHECK (settled_micro_usd >= 0 AND settled_micro_usd <= quoted_micro_usd),
        created_at              TIMESTAMPTZ NOT NULL,
        expires_at              TIMESTAMPTZ NOT NULL
      )`
    yield* sql`CREATE INDEX reservations_held_expiry ON reservations (expires_at) WHERE status = 'held'`
    yield* sql`CREATE INDEX reservations_account ON reservations (account_id, created_at DESC, id DESC)`
    // Held plus settled spend per agent and UTC day: the daily cap's counter.
    yield* sql`
      CREATE TABLE agent_daily_spend (
        agent_id          TEXT NOT NULL REFERENCES agents (id),
        day               TEXT NOT NULL,
        spent_micro_usd   BIGINT NOT NULL CHECK (spent_micro_usd >= 0),
        PRIMARY KEY (agent_id, day)
      )`
    yield* sql`
      CREATE TABLE transactions (
        id                      TEXT PRIMARY KEY,
        account_id              TEXT NOT NULL REFERENCES accounts (id),
        agent_id                TEXT REFERENCES agents (id),
        type                    TEXT NOT NULL CHECK (type IN ('charge', 'credit', 'refund')),
        amount_micro_usd        BIGINT NOT NULL CHECK (amount_micro_usd >= 0),
        usd_micro               BIGINT NOT NULL CHECK (usd_micro >= 0),
        sats_msat               BIGINT NOT NULL CHECK (sats_msat >= 0),
        rate_micro_usd_per_btc  BIGINT CHECK (rate_micro_usd_per_btc > 0),
        description             TEXT NOT NULL,
        capability              TEXT,
        provider                TEXT,
        audit_id                TEXT NOT NULL UNIQUE,
        credit_key              TEXT,
        created_at              TIMESTAMPTZ NOT NULL,
        UNIQUE (account_id, credit_key)
      )`
    yield* sql`CREATE INDEX transactions_account ON transactions (account_id, created_at DESC, id DESC)`
    yield* sql`CREATE INDEX transactions_agent ON transactions (agent_id, type)`
    yield* sql`
      CREATE TABLE audit_log (
        id                TEXT PRIMARY KEY,
        account_id        TEXT NOT NULL REFERENCES accounts (id),
        seq               BIGINT NOT NULL CHECK (seq >= 1),
        kind              TEXT NOT NULL CHECK (kind IN ('reserve', 'settle', 'release', 'credit')),
        agent_id          TEXT,
        reservation_id    TEXT,
        transaction_id    TEXT,
        amount_micro_usd  BIGINT NOT NULL,
        usd_delta_micro   BIGINT NOT NULL,
        sats_delta_msat   BIGINT NOT NULL,
        details           TEXT NOT NULL,
        created_at        TIMESTAMPTZ NOT NULL,
        prev_hash         TEXT NOT NULL,
        hash              TEXT NOT NULL,
        UNIQUE (account_id, seq)
      )`
    // Append-only: the database itself refuses to change or delete a record.
    yield* sql.unsafe(`
      CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'audit_log is append-only';
      END
      $$`)
    yield* sql`
      CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
      FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()`
  }),
  "0003_idempotency_keys": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // One row per (scope, key): in progress while response_status is NULL,
    // completed (holding the response to replay) once it is set.
    yield* sql`
      CREATE TABLE idempotency_keys (
        scope            TEXT NOT NULL,
        key              TEXT NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
        request_hash     TEXT NOT NULL CHECK (request_hash ~ '^[0-9a-f]{64}$'),
        response_status  BIGINT CHECK (response_status BETWEEN 100 AND 599),
        response_body    TEXT,
        created_at       TIMESTAMPTZ NOT NULL,
        expires_at       TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (scope, key),
        CHECK ((response_status IS NULL) = (response_body IS NULL))
      )`
    yield* sql`CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at)`
  }),
  "0004_invoices": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Funding requests. (type, external_id) is unique: a payment notice finds
    // exactly one invoice, and the credit it causes uses the invoice id as its
    // credit key, so an invoice is credited at most once.
    yield* sql`
      CREATE TABLE invoices (
        id                    TEXT PRIMARY KEY,
        account_id            TEXT NOT NULL REFERENCES accounts (id),
        agent_id              TEXT NOT NULL REFERENCES agents (id),
        type                  TEXT NOT NULL CHECK (type IN ('lightning', 'card')),
        amount_msat           BIGINT CHECK (amount_msat > 0),
        amount_micro_usd      BIGINT CHECK (amount_micro_usd > 0),
        status                TEXT NOT NULL CHECK (status IN ('pending', 'paid', 'expired')),
        rail                  TEXT NOT NULL,
        external_id           TEXT NOT NULL,
        payment_request       TEXT,
        checkout_url          TEXT,
        created_at            TIMESTAMPTZ NOT NULL,
        expires_at            TIMESTAMPTZ NOT NULL,
        paid_at               TIMESTAMPTZ,
        late_payment_at       TIMESTAMPTZ,
        late_payment_amount   BIGINT,
        transaction_id        TEXT REFERENCES transactions (id),
        UNIQUE (type, external_id),
        CHECK ((type = 'lightning') = (amount_msat IS NOT NULL)),
        CHECK ((type = 'card') = (amount_micro_usd IS NOT NULL)),
        CHECK ((status = 'paid') = (paid_at IS NOT NULL AND transaction_id IS NOT NULL))
      )`
    yield* sql`CREATE INDEX invoices_account ON invoices (account_id, created_at DESC, id DESC)`
    yield* sql`CREATE INDEX invoices_pending_expiry ON invoices (expires_at) WHERE status = 'pending'`
    yield* sql`CREATE INDEX invoices_payment_request ON invoices (payment_request)`
    yield* sql`
      CREATE TABLE rail_cursors (
        name    TEXT PRIMARY KEY,
        value   TEXT NOT NULL
      )`
  }),
  "0005_registry": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`
      CREATE TABLE registry_submissions (
        id            TEXT PRIMARY KEY,
        account_id    TEXT NOT NULL REFERENCES accounts (id),
        agent_id      TEXT NOT NULL REFERENCES agents (id),
        slug          TEXT NOT NULL,
        status        TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
        content       TEXT NOT NULL,
        created_at    TIMESTAMPTZ NOT NULL,
        reviewed_at   TIMESTAMPTZ,
        review_note   TEXT
      )`
    yield* sql`CREATE UNIQUE INDEX registry_live_slug ON registry_submissions (slug) WHERE status <> 'rejected'`
    yield* sql`CREATE INDEX registry_account ON registry_submissions (account_id, created_at DESC, id DESC)`
  }),
  "0006_amount_bounds": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Pocket maximums (MAX_USD_POCKET_MICRO_USD, MAX_SATS_POCKET_MSAT in
    // src/domain/Money.ts): the payment rule refuses a credit beyond them; the
    // database refuses one too, far below where BIGINT arithmetic overflows.
    yield* sql`
      ALTER TABLE wallets
        ADD CONSTRAINT wallets_usd_micro_max CHECK (usd_micro <= 1000000000000000),
        ADD CONSTRAINT wallets_sats_msat_max CHECK (sats_msat <= 1000000000000000)`
    // A payment that would overfill a pocket leaves its invoice 'refused', with
    // the payment recorded in late_payment_* like a late one.
    yield* sql`ALTER TABLE invoices DROP CONSTRAINT invoices_status_check`
    yield* sql`
      ALTER TABLE invoices ADD CONSTRAINT invoices_status_check
        CHECK (status IN ('pending', 'paid', 'expired', 'refused'))`
  }),
  "0007_agent_control": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Key rotation keeps the previous key until its grace ends; a deleted
    // agent keeps its row (history names it) and never authenticates again.
    yield* sql`
      ALTER TABLE agents
        ADD COLUMN prev_key_hash TEXT UNIQUE CHECK (prev_key_hash ~ '^[0-9a-f]{64}$'),
        ADD COLUMN prev_key_expires_at TIMESTAMPTZ,
        ADD COLUMN deleted_at TIMESTAMPTZ,
        ADD COLUMN max_per_month_micro_usd BIGINT CHECK (max_per_month_micro_usd > 0),
        ADD CONSTRAINT agents_prev_key_pair CHECK ((prev_key_hash IS NULL) = (prev_key_expires_at IS NULL))`
  }),
  "0008_velocity": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Velocity limits are checked on the agent's reservations of the last
    // hour / minute, read under the wallet lock like the daily spend.
    yield* sql`
      ALTER TABLE agents
        ADD COLUMN max_per_hour_micro_usd BIGINT CHECK (max_per_hour_micro_usd > 0),
        ADD COLUMN max_calls_per_minute INTEGER CHECK (max_calls_per_minute > 0),
        ADD COLUMN auto_kill BOOLEAN NOT NULL DEFAULT FALSE,
        ADD COLUMN kill_reason TEXT CHECK (kill_reason IN ('owner', 'velocity')),
        ADD CONSTRAINT agents_kill_reason CHECK (killed OR kill_reason IS NULL)`
    yield* sql`CREATE INDEX reservations_agent_created ON reservations (agent_id, created_at DESC)`
  }),
  "0009_refunds": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // A refund transaction names the charge it gives money back for; the
    // charge carries what its refunds gave back so far, and the database
    // refuses totals above what the charge took, in value and in each pocket.
    yield* sql`
      ALTER TABLE transactions
        ADD COLUMN refund_of TEXT REFERENCES transactions (id),
        ADD COLUMN refunded_micro_usd BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN refunded_usd_micro BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN refunded_sats_msat BIGINT NOT NULL DEFAULT 0,
        ADD CONSTRAINT transactions_refund_of CHECK ((type = 'refund') = (refund_of IS NOT NULL)),
        ADD CONSTRAINT transactions_refunded_bounds CHECK (
          refunded_micro_usd >= 0 AND refunded_micro_usd <= amount_micro_usd AND
          refunded_usd_micro >= 0 AND refunded_usd_micro <= usd_micro AND
          refunded_sats_msat >= 0 AND refunded_sats_msat <= sats_msat),
        ADD CONSTRAINT transactions_refunded_charge CHECK (
          type = 'charge' OR (refunded_micro_usd = 0 AND refunded_usd_micro = 0 AND refunded_sats_msat = 0))`
    yield* sql`CREATE INDEX transactions_refund_of ON transactions (refund_of) WHERE refund_of IS NOT NULL`
    yield* sql`ALTER TABLE audit_log DROP CONSTRAINT audit_log_kind_check`
    yield* sql`
      ALTER TABLE audit_log ADD CONSTRAINT audit_log_kind_check
        CHECK (kind IN ('reserve', 'settle', 'release', 'credit', 'refund'))`
  }),
  "0010_quotes": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Binding quotes (src/quotes/Quote.ts): checked and used up under the
    // wallet lock, in the transaction that makes the call's hold.
    yield* sql`
      CREATE TABLE quotes (
        id                TEXT PRIMARY KEY,
        account_id        TEXT NOT NULL REFERENCES accounts (id),
        agent_id          TEXT NOT NULL REFERENCES agents (id),
        capability        TEXT NOT NULL,
        provider          TEXT NOT NULL,
        model             TEXT,
        request_hash      TEXT NOT NULL CHECK (request_hash ~ '^[0-9a-f]{64}$'),
        quoted_micro_usd  BIGINT NOT NULL CHECK (quoted_micro_usd >= 0),
        created_at        TIMESTAMPTZ NOT NULL,
        expires_at        TIMESTAMPTZ NOT NULL CHECK (expires_at > created_at),
        used_at           TIMESTAMPTZ,
        reservation_id    TEXT REFERENCES reservations (id),
        CHECK ((used_at IS NULL) = (reservation_id IS NULL))
      )`
    yield* sql`CREATE UNIQUE INDEX quotes_reservation ON quotes (reservation_id) WHERE reservation_id IS NOT NULL`
    yield* sql`CREATE INDEX quotes_expires ON quotes (expires_at)`
  }),
  "0011_webhooks": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Endpoints of an account. The signing secret is kept as given (it signs);
    // a rotation keeps the previous one until its overlap ends.
    yield* sql`
      CREATE TABLE webhook_endpoints (
        id                          TEXT PRIMARY KEY,
        account_id                  TEXT NOT NULL REFERENCES accounts (id),
        url                         TEXT NOT NULL,
        description                 TEXT NOT NULL DEFAULT '',
        events                      TEXT NOT NULL DEFAULT '',
        enabled                     BOOLEAN NOT NULL DEFAULT TRUE,
        secret                      TEXT NOT NULL,
        previous_secret             TEXT,
        previous_secret_expires_at  TIMESTAMPTZ,
        consecutive_failures        INTEGER NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
        disabled_at                 TIMESTAMPTZ,
        created_at                  TIMESTAMPTZ NOT NULL,
        updated_at                  TIMESTAMPTZ NOT NULL,
        CONSTRAINT webhook_endpoints_previous_pair
          CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL))
      )`
    yield* sql`CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id, created_at DESC, id DESC)`
    // The outbox: written in the transaction of the change an event describes.
    yield* sql`
      CREATE TABLE webhook_events (
        id          TEXT PRIMARY KEY,
        account_id  TEXT NOT NULL REFERENCES accounts (id),
        type        TEXT NOT NULL,
        payload     TEXT NOT NULL,
        dedupe_key  TEXT UNIQUE,
        created_at  TIMESTAMPTZ NOT NULL
      )`
    // The owner's low-balance alert: wallet.low_balance when a debit crosses it.
    yield* sql`
      ALTER TABLE wallets ADD COLUMN low_balance_threshold_micro_usd BIGINT
        CHECK (low_balance_threshold_micro_usd > 0)`
    yield* sql`CREATE INDEX webhook_events_account ON webhook_events (account_id, created_at DESC, id DESC)`
    // No foreign key to the endpoint: a spend or a credit writing its delivery
    // rows must never wait on, or fail because of, an endpoint being deleted
    // (a row written for an endpoint deleted meanwhile is never claimed).
    // One row per (event, endpoint), written with the event. A worker claims a
    // due row by setting lease_until (FOR UPDATE SKIP LOCKED) and bumping
    // attempts; its result is recorded only for the attempt it claimed.
    yield* sql`
      CREATE TABLE webhook_deliveries (
        id               TEXT PRIMARY KEY,
        account_id       TEXT NOT NULL REFERENCES accounts (id),
        endpoint_id      TEXT NOT NULL,
        event_id         TEXT NOT NULL REFERENCES webhook_events (id),
        event_type       TEXT NOT NULL,
        status           TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
        attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        next_attempt_at  TIMESTAMPTZ,
        lease_until      TIMESTAMPTZ,
        window_start     TIMESTAMPTZ NOT NULL,
        last_attempt_at  TIMESTAMPTZ,
        last_status_code INTEGER,
        last_error       TEXT,
        delivered_at     TIMESTAMPTZ,
        created_at       TIMESTAMPTZ NOT NULL,
        UNIQUE (event_id, endpoint_id)
      )`
    yield* sql`CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`
    yield* sql`CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at DESC, id DESC)`
  }),
  "0013_cache_notifications": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Processes keep agents and the approved registry services in memory
    // (adapters/sql/ReadCache.ts). Every change of either is announced on
    // the channel spendgate_cache, delivered when the change commits:
    // `agent:<id>` for an agent (a lastActiveAt-only write excepted: nothing
    // is decided on it), `registry` for a registry submission.
    yield* sql`
      CREATE FUNCTION spendgate_notify_agent_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'UPDATE' THEN
          IF (to_jsonb(OLD) - 'last_active_at') = (to_jsonb(NEW) - 'last_active_at') THEN
            RETURN NULL;
          END IF;
          PERFORM pg_notify('spendgate_cache', 'agent:' || NEW.id);
        ELSE
          PERFORM pg_notify('spendgate_cache', 'agent:' || OLD.id);
        END IF;
        RETURN NULL;
      END
      $$`
    yield* sql`
      CREATE TRIGGER agents_notify_change AFTER UPDATE OR DELETE ON agents
      FOR EACH ROW EXECUTE FUNCTION spendgate_notify_agent_change()`
    yield* sql`
      CREATE FUNCTION spendgate_notify_registry_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('spendgate_cache', 'registry');
        RETURN NULL;
      END
      $$`
    yield* sql`
      CREATE TRIGGER registry_notify_change AFTER INSERT OR UPDATE OR DELETE ON registry_submissions
      FOR EACH STATEMENT EXECUTE FUNCTION spendgate_notify_registry_change()`
  })
}
