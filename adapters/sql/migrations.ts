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
  }),
  "0014_ledger_functions": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // One round trip per ledger step: reserve, settle and release as SQL
    // functions that lock, decide and write in one call. The decisions mirror
    // the pure rules of src/wallet/decide.ts (planHold, planSettle), which stay
    // the single source of truth; test/adapters/sql/ledger-functions.property.test.ts
    // proves on random snapshots that both decide identically. Anything the
    // functions do not cover (refusals, with their events and auto-kill; holds
    // that fire webhook events; quotes; late settles) they leave untouched and
    // answer 'slow', and the store takes the general path in TypeScript.

    // The audit chain's hash (src/audit/chain.ts canonicalAuditText): SHA-256 of
    // the JSON array of the record's fields, amounts as decimal strings, the
    // time as toISOString() gives it (UTC, milliseconds).
    yield* sql.unsafe(`
      CREATE FUNCTION spendgate_audit_hash(
        p_id TEXT, p_account_id TEXT, p_seq BIGINT, p_kind TEXT, p_agent_id TEXT, p_reservation_id TEXT,
        p_transaction_id TEXT, p_amount NUMERIC, p_usd_delta NUMERIC, p_sats_delta NUMERIC, p_details TEXT,
        p_created_at TIMESTAMPTZ, p_prev_hash TEXT
      ) RETURNS TEXT LANGUAGE sql STABLE AS $$
        SELECT encode(sha256(convert_to(
          '["spendgate-audit-v1",' ||
          COALESCE(to_json(p_id)::text, 'null') || ',' ||
          COALESCE(to_json(p_account_id)::text, 'null') || ',' ||
          to_json(p_seq::text)::text || ',' ||
          COALESCE(to_json(p_kind)::text, 'null') || ',' ||
          COALESCE(to_json(p_agent_id)::text, 'null') || ',' ||
          COALESCE(to_json(p_reservation_id)::text, 'null') || ',' ||
          COALESCE(to_json(p_transaction_id)::text, 'null') || ',' ||
          to_json(p_amount::text)::text || ',' ||
          to_json(p_usd_delta::text)::text || ',' ||
          to_json(p_sats_delta::text)::text || ',' ||
          COALESCE(to_json(p_details)::text, 'null') || ',' ||
          to_json(to_char(p_created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text || ',' ||
          COALESCE(to_json(p_prev_hash)::text, 'null') || ']',
          'UTF8')), 'hex')
      $$`)

    // Reserve (planHold): the wallet lock, then the agent's kill switch and
    // policy, velocity, daily and monthly caps and the balance, as they are
    // under that lock; then the hold, its audit record, the day's counter and
    // the wallet in the same call. Answers the outcome ('held', the refusal's
    // tag, or 'slow') and, when held, what each pocket gave. Redefined by
    // 0022 (the velocity checks) and 0023 (the day's hours); the rest is
    // unchanged there.
    yield* sql.unsafe(`
      CREATE FUNCTION spendgate_reserve(
        p_account_id TEXT, p_agent_id TEXT, p_reservation_id TEXT, p_audit_id TEXT,
        p_capability TEXT, p_provider TEXT, p_quoted BIGINT, p_rate BIGINT, p_day TEXT,
        p_now TIMESTAMPTZ, p_expires_at TIMESTAMPTZ, p_known_capabilities TEXT,
        OUT outcome TEXT, OUT from_usd BIGINT, OUT from_sats BIGINT
      ) LANGUAGE plpgsql AS $$
      DECLARE
        w wallets%ROWTYPE;
        a agents%ROWTYPE;
        daily NUMERIC;
        monthly NUMERIC;
        allowed TEXT[];
        hour_spent NUMERIC;
        minute_calls BIGINT;
        cap_threshold NUMERIC;
        value_before NUMERIC;
        value_after NUMERIC;
        seq BIGINT;
        details TEXT;
        hash TEXT;
      BEGIN
        from_usd := 0;
        from_sats := 0;
        SELECT * INTO w FROM wallets WHERE account_id = p_account_id FOR UPDATE;
        IF NOT FOUND THEN outcome := 'slow'; RETURN; END IF;
        SELECT * INTO a FROM agents WHERE id = p_agent_id AND account_id = p_account_id;
        IF NOT FOUND THEN outcome := 'slow'; RETURN; END IF;
        -- The day's and the calendar month's spend, as the store reads them (monthSpent).
        SELECT COALESCE((SELECT spent_micro_usd FROM agent_daily_spend WHERE agent_id = p_agent_id AND day = p_day), 0)
          INTO daily;
        SELECT COALESCE(SUM(spent_micro_usd), 0) INTO monthly FROM agent_daily_spend
          WHERE agent_id = p_agent_id AND day >= left(p_day, 7) || '-01' AND day <= left(p_day, 7) || '-31';

        IF a.killed OR a.deleted_at IS NOT NULL THEN outcome := 'AgentKilled'; RETURN; END IF;
        -- Stored capabilities the service does not know are ignored, as when the policy is read.
        allowed := ARRAY(SELECT c FROM unnest(string_to_array(a.allowed_capabilities, ',')) AS c
                         WHERE c = ANY (string_to_array(p_known_capabilities, ',')));
        IF cardinality(allowed) > 0 AND NOT (p_capability = ANY (allowed)) THEN
          outcome := 'CapabilityNotAllowed'; RETURN;
        END IF;
        IF a.max_per_call_micro_usd IS NOT NULL AND p_quoted > a.max_per_call_micro_usd THEN
          outcome := 'PerCallLimitExceeded'; RETURN;
        END IF;
        IF a.max_per_hour_micro_usd IS NOT NULL OR a.max_calls_per_minute IS NOT NULL THEN
          -- As the store's recentOf: reservations stamped after now count too.
          SELECT
            COALESCE(SUM(CASE WHEN status = 'held' THEN quoted_micro_usd
                              WHEN status = 'settled' THEN COALESCE(settled_micro_usd, 0)
                              ELSE 0 END), 0),
            COUNT(*) FILTER (WHERE created_at > p_now - interval '60 seconds')
            INTO hour_spent, minute_calls
            FROM reservations
            WHERE agent_id = p_agent_id AND created_at > p_now - interval '3600 seconds';
          IF a.max_calls_per_minute IS NOT NULL AND minute_calls + 1 > a.max_calls_per_minute THEN
            outcome := 'CallRateExceeded'; RETURN;
          END IF;
          IF a.max_per_hour_micro_usd IS NOT NULL AND hour_spent + p_quoted > a.max_per_hour_micro_usd THEN
            outcome := 'VelocityExceeded'; RETURN;
          END IF;
        END IF;
        IF a.max_per_day_micro_usd IS NOT NULL AND daily + p_quoted > a.max_per_day_micro_usd THEN
          outcome := 'BudgetExceeded'; RETURN;
        END IF;
        IF a.max_per_month_micro_usd IS NOT NULL AND monthly + p_quoted > a.max_per_month_micro_usd THEN
          outcome := 'MonthlyBudgetExceeded'; RETURN;
        END IF;

        IF w.usd_micro >= p_quoted THEN
          from_usd := p_quoted;
        ELSIF p_rate IS NULL THEN
          outcome := CASE WHEN w.sats_msat > 0 THEN 'RateUnavailable' ELSE 'InsufficientBalance' END;
          RETURN;
        ELSE
          -- usd first, the rest in sats at the rate, rounded up to the msat.
          from_usd := w.usd_micro;
          from_sats := div((p_quoted - w.usd_micro)::numeric * 100000000000 + p_rate - 1, p_rate);
          IF from_sats > w.sats_msat THEN
            from_usd := 0; from_sats := 0;
            outcome := 'InsufficientBalance'; RETURN;
          END IF;
        END IF;

        -- A hold that fires a webhook event (src/webhooks/spendEvents.ts) takes the general path.
        IF a.max_per_day_micro_usd IS NOT NULL THEN
          cap_threshold := div(a.max_per_day_micro_usd::numeric * 80, 100);
          IF (daily < cap_threshold AND daily + p_quoted >= cap_threshold)
             OR daily + p_quoted >= a.max_per_day_micro_usd THEN
            from_usd := 0; from_sats := 0;
            outcome := 'slow'; RETURN;
          END IF;
        END IF;
        IF w.low_balance_threshold_micro_usd IS NOT NULL THEN
          value_before := w.usd_micro + CASE WHEN p_rate IS NULL THEN 0
            ELSE div(w.sats_msat::numeric * p_rate, 100000000000) END;
          value_after := (w.usd_micro - from_usd) + CASE WHEN p_rate IS NULL THEN 0
            ELSE div((w.sats_msat - from_sats)::numeric * p_rate, 100000000000) END;
          IF value_before >= w.low_balance_threshold_micro_usd AND value_after < w.low_balance_threshold_micro_usd THEN
            from_usd := 0; from_sats := 0;
            outcome := 'slow'; RETURN;
          END IF;
        END IF;

        seq := w.audit_seq + 1;
        details := '{"capability":' || to_json(p_capability)::text || ',"provider":' || to_json(p_provider)::text || '}';
        hash := spendgate_audit_hash(p_audit_id, p_account_id, seq, 'reserve', p_agent_id, p_reservation_id, NULL,
          p_quoted, -from_usd, -from_sats, details, p_now, w.audit_head);
        INSERT INTO audit_log (id, account_id, seq, kind, agent_id, reservation_id, transaction_id, amount_micro_usd,
            usd_delta_micro, sats_delta_msat, details, created_at, prev_hash, hash)
          VALUES (p_audit_id, p_account_id, seq, 'reserve', p_agent_id, p_reservation_id, NULL, p_quoted,
            -from_usd, -from_sats, details, p_now, w.audit_head, hash);
        INSERT INTO reservations (id, account_id, agent_id, capability, provider, quoted_micro_usd, held_usd_micro,
            held_sats_msat, rate_micro_usd_per_btc, day, status, settled_micro_usd, created_at, expires_at)
          VALUES (p_reservation_id, p_account_id, p_agent_id, p_capability, p_provider, p_quoted, from_usd,
            from_sats, p_rate, p_day, 'held', NULL, p_now, p_expires_at);
        INSERT INTO agent_daily_spend (agent_id, day, spent_micro_usd) VALUES (p_agent_id, p_day, p_quoted)
          ON CONFLICT (agent_id, day) DO UPDATE SET spent_micro_usd = agent_daily_spend.spent_micro_usd + p_quoted;
        UPDATE wallets SET usd_micro = usd_micro - from_usd, sats_msat = sats_msat - from_sats,
            audit_seq = seq, audit_head = hash
          WHERE account_id = p_account_id;
        outcome := 'held';
      END
      $$`)

    // Reserves of one wallet coalesced into one call, one transaction, one
    // commit: each request is decided by spendgate_reserve in array order,
    // seeing the holds made before it in the batch. Answers one row per
    // request (ord: its 1-based position) up to the first that is not held.
    yield* sql.unsafe(`
      CREATE FUNCTION spendgate_reserve_batch(p_requests JSONB, p_known_capabilities TEXT)
      RETURNS TABLE (ord BIGINT, outcome TEXT, from_usd BIGINT, from_sats BIGINT) LANGUAGE plpgsql AS $$
      DECLARE
        req JSONB;
        i BIGINT;
      BEGIN
        FOR req, i IN SELECT e, n FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS t (e, n) LOOP
          ord := i;
          SELECT r.outcome, r.from_usd, r.from_sats INTO outcome, from_usd, from_sats
            FROM spendgate_reserve(req->>'accountId', req->>'agentId', req->>'reservationId', req->>'auditId',
              req->>'capability', req->>'provider', (req->>'quoted')::bigint, (req->>'rate')::bigint, req->>'day',
              (req->>'now')::timestamptz, (req->>'expiresAt')::timestamptz, p_known_capabilities) AS r;
          RETURN NEXT;
          -- A refusal or a hold for the general path ends the batch: what it records
          -- (a kill, a hold with its events) comes before the decisions behind it.
          EXIT WHEN outcome <> 'held';
        END LOOP;
      END
      $$`)

    // Settle (planSettle) of a held reservation: the charge is the actual
    // cost clamped to the quote, usd first, the rest in sats at the hold's
    // rate (rounded up, never more than was held); the rest goes back. A
    // reservation the sweep released unsettled is left to the general path
    // ('slow'), anything else not held is answered 'NotHeld'.
    yield* sql.unsafe(`
      CREATE FUNCTION spendgate_settle(
        p_account_id TEXT, p_reservation_id TEXT, p_actual NUMERIC, p_transaction_id TEXT, p_audit_id TEXT,
        p_description TEXT, p_now TIMESTAMPTZ,
        OUT outcome TEXT, OUT charged BIGINT, OUT charge_usd BIGINT, OUT charge_sats BIGINT,
        OUT wallet_usd BIGINT, OUT wallet_sats BIGINT,
        -- The reservation as locked (before this settle): r_ + its columns.
        OUT r_id TEXT, OUT r_account_id TEXT, OUT r_agent_id TEXT, OUT r_capability TEXT, OUT r_provider TEXT,
        OUT r_quoted_micro_usd BIGINT, OUT r_held_usd_micro BIGINT, OUT r_held_sats_msat BIGINT,
        OUT r_rate_micro_usd_per_btc BIGINT, OUT r_day TEXT, OUT r_status TEXT, OUT r_settled_micro_usd BIGINT,
        OUT r_created_at TIMESTAMPTZ, OUT r_expires_at TIMESTAMPTZ
      ) LANGUAGE plpgsql AS $$
      DECLARE
        w_seq BIGINT;
        w_head TEXT;
        r reservations%ROWTYPE;
        remainder NUMERIC;
        seq BIGINT;
        details TEXT;
        hash TEXT;
      BEGIN
        -- The lock shape of the store's lockHeld: wallet and reservation in one statement.
        SELECT r0.* INTO r FROM wallets w JOIN reservations r0 ON r0.account_id = w.account_id
          WHERE w.account_id = p_account_id AND r0.id = p_reservation_id
          FOR UPDATE;
        IF NOT FOUND THEN outcome := 'NotHeld'; RETURN; END IF;
        r_id := r.id; r_account_id := r.account_id; r_agent_id := r.agent_id; r_capability := r.capability;
        r_provider := r.provider; r_quoted_micro_usd := r.quoted_micro_usd; r_held_usd_micro := r.held_usd_micro;
        r_held_sats_msat := r.held_sats_msat; r_rate_micro_usd_per_btc := r.rate_micro_usd_per_btc; r_day := r.day;
        r_status := r.status; r_settled_micro_usd := r.settled_micro_usd; r_created_at := r.created_at;
        r_expires_at := r.expires_at;
        IF r.status = 'released' AND r.settled_micro_usd IS NULL THEN outcome := 'slow'; RETURN; END IF;
        IF r.status <> 'held' THEN outcome := 'NotHeld'; RETURN; END IF;
        SELECT audit_seq, audit_head INTO w_seq, w_head FROM wallets WHERE account_id = p_account_id;
        charged := GREATEST(0, LEAST(p_actual, r.quoted_micro_usd));
        charge_usd := LEAST(charged, r.held_usd_micro);
        remainder := charged - charge_usd;
        charge_sats := 0;
        IF remainder > 0 AND r.rate_micro_usd_per_btc IS NOT NULL THEN
          charge_sats := LEAST(r.held_sats_msat,
            div(remainder * 100000000000 + r.rate_micro_usd_per_btc - 1, r.rate_micro_usd_per_btc));
        END IF;
        seq := w_seq + 1;
        details := '{"capability":' || to_json(r.capability)::text || ',"provider":' || to_json(r.provider)::text || '}';
        hash := spendgate_audit_hash(p_audit_id, p_account_id, seq, 'settle', r.agent_id, r.id, p_transaction_id,
          charged, r.held_usd_micro - charge_usd, r.held_sats_msat - charge_sats, details, p_now, w_head);
        INSERT INTO audit_log (id, account_id, seq, kind, agent_id, reservation_id, transaction_id, amount_micro_usd,
            usd_delta_micro, sats_delta_msat, details, created_at, prev_hash, hash)
          VALUES (p_audit_id, p_account_id, seq, 'settle', r.agent_id, r.id, p_transaction_id, charged,
            r.held_usd_micro - charge_usd, r.held_sats_msat - charge_sats, details, p_now, w_head, hash);
        UPDATE reservations SET status = 'settled', settled_micro_usd = charged WHERE id = r.id;
        UPDATE agent_daily_spend SET spent_micro_usd = spent_micro_usd - (r.quoted_micro_usd - charged)
          WHERE agent_id = r.agent_id AND day = r.day;
        INSERT INTO transactions (id, account_id, agent_id, type, amount_micro_usd, usd_micro, sats_msat,
            rate_micro_usd_per_btc, description, capability, provider, audit_id, refund_of, credit_key, created_at)
          VALUES (p_transaction_id, p_account_id, r.agent_id, 'charge', charged, charge_usd, charge_sats,
            r.rate_micro_usd_per_btc, p_description, r.capability, r.provider, p_audit_id, NULL, NULL, p_now);
        UPDATE wallets SET usd_micro = usd_micro + (r.held_usd_micro - charge_usd),
            sats_msat = sats_msat + (r.held_sats_msat - charge_sats), audit_seq = seq, audit_head = hash
          WHERE account_id = p_account_id
          RETURNING usd_micro, sats_msat INTO wallet_usd, wallet_sats;
        outcome := 'Settled';
      END
      $$`)

    // Release of a held reservation: everything it held goes back.
    yield* sql.unsafe(`
      CREATE FUNCTION spendgate_release(
        p_account_id TEXT, p_reservation_id TEXT, p_audit_id TEXT, p_reason TEXT, p_now TIMESTAMPTZ
      ) RETURNS TEXT LANGUAGE plpgsql AS $$
      DECLARE
        w_seq BIGINT;
        w_head TEXT;
        r reservations%ROWTYPE;
        seq BIGINT;
        details TEXT;
        hash TEXT;
      BEGIN
        SELECT r0.* INTO r FROM wallets w JOIN reservations r0 ON r0.account_id = w.account_id
          WHERE w.account_id = p_account_id AND r0.id = p_reservation_id
          FOR UPDATE;
        IF NOT FOUND OR r.status <> 'held' THEN RETURN 'NotHeld'; END IF;
        SELECT audit_seq, audit_head INTO w_seq, w_head FROM wallets WHERE account_id = p_account_id;
        seq := w_seq + 1;
        details := '{"reason":' || to_json(p_reason)::text || '}';
        hash := spendgate_audit_hash(p_audit_id, p_account_id, seq, 'release', r.agent_id, r.id, NULL,
          r.quoted_micro_usd, r.held_usd_micro, r.held_sats_msat, details, p_now, w_head);
        INSERT INTO audit_log (id, account_id, seq, kind, agent_id, reservation_id, transaction_id, amount_micro_usd,
            usd_delta_micro, sats_delta_msat, details, created_at, prev_hash, hash)
          VALUES (p_audit_id, p_account_id, seq, 'release', r.agent_id, r.id, NULL, r.quoted_micro_usd,
            r.held_usd_micro, r.held_sats_msat, details, p_now, w_head, hash);
        UPDATE reservations SET status = 'released' WHERE id = r.id;
        UPDATE agent_daily_spend SET spent_micro_usd = spent_micro_usd - r.quoted_micro_usd
          WHERE agent_id = r.agent_id AND day = r.day;
        UPDATE wallets SET usd_micro = usd_micro + r.held_usd_micro, sats_msat = sats_msat + r.held_sats_msat,
            audit_seq = seq, audit_head = hash
          WHERE account_id = p_account_id;
        RETURN 'Released';
      END
      $$`)
  }),
  "0016_l402_tokens": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Selling capabilities over L402 (src/l402/Seller.ts): the macaroon root
    // key and the internal sales account, written once (the first writer wins).
    yield* sql`
      CREATE TABLE l402_settings (
        name   TEXT PRIMARY KEY CHECK (name IN ('root_key', 'sales_account')),
        value  TEXT NOT NULL
      )`
    // One row per token used at least once; uses never pass calls_allowed.
    yield* sql`
      CREATE TABLE l402_tokens (
        token_id       TEXT PRIMARY KEY CHECK (token_id ~ '^[0-9a-f]{64}$'),
        payment_hash   TEXT NOT NULL CHECK (payment_hash ~ '^[0-9a-f]{64}$'),
        calls_allowed  INTEGER NOT NULL CHECK (calls_allowed >= 1),
        uses           INTEGER NOT NULL CHECK (uses >= 0 AND uses <= calls_allowed),
        first_used_at  TIMESTAMPTZ NOT NULL,
        last_used_at   TIMESTAMPTZ NOT NULL
      )`
  }),
  "0017_l402_payments": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Outbound L402 (src/l402/): the payee hosts each account allows, and every
    // Lightning payment made for a caller, written before it is sent.
    yield* sql`
      CREATE TABLE l402_payee_hosts (
        account_id  TEXT NOT NULL REFERENCES accounts (id),
        host        TEXT NOT NULL CHECK (length(host) BETWEEN 1 AND 261),
        created_at  TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (account_id, host)
      )`
    yield* sql`
      CREATE TABLE l402_payments (
        payment_hash            TEXT PRIMARY KEY CHECK (payment_hash ~ '^[0-9a-f]{64}$'),
        account_id              TEXT NOT NULL REFERENCES accounts (id),
        agent_id                TEXT NOT NULL REFERENCES agents (id),
        reservation_id          TEXT NOT NULL REFERENCES reservations (id),
        url                     TEXT NOT NULL,
        payment_request         TEXT NOT NULL,
        amount_msat             BIGINT NOT NULL CHECK (amount_msat > 0),
        fee_limit_msat          BIGINT NOT NULL CHECK (fee_limit_msat >= 0),
        rate_micro_usd_per_btc  BIGINT NOT NULL CHECK (rate_micro_usd_per_btc > 0),
        status                  TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
        preimage                TEXT CHECK (preimage ~ '^[0-9a-f]{64}$'),
        fee_msat                BIGINT CHECK (fee_msat >= 0),
        transaction_id          TEXT REFERENCES transactions (id),
        created_at              TIMESTAMPTZ NOT NULL,
        resolved_at             TIMESTAMPTZ,
        CHECK ((status = 'succeeded') = (preimage IS NOT NULL))
      )`
    yield* sql`CREATE INDEX l402_payments_pending ON l402_payments (created_at) WHERE status = 'pending'`
    yield* sql`CREATE INDEX l402_payments_transaction ON l402_payments (transaction_id) WHERE transaction_id IS NOT NULL`
  }),
  "0018_ledger_batch": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Settles taken off the caller's path (adapters/sql/SqlLedger.ts) are
    // committed together: with the next reserves of their wallet, or on their
    // own, several wallets in one call. One transaction, one commit: first
    // the settles (spendgate_settle, in account order so that two such calls
    // never wait for each other's locks the other way round), answered with
    // negative ords; then the reserves in the order given, as
    // spendgate_reserve_batch decides them, each held one answered with the
    // wallet's pockets after it (the receipt's balance).
    yield* sql.unsafe(`
      CREATE FUNCTION spendgate_ledger_batch(p_settles JSONB, p_requests JSONB, p_known_capabilities TEXT)
      RETURNS TABLE (ord BIGINT, outcome TEXT, from_usd BIGINT, from_sats BIGINT, wallet_usd BIGINT, wallet_sats BIGINT)
      LANGUAGE plpgsql AS $$
      DECLARE
        req JSONB;
        i BIGINT;
      BEGIN
        FOR req, i IN SELECT e, n FROM jsonb_array_elements(p_settles) WITH ORDINALITY AS t (e, n)
            ORDER BY e->>'accountId', n LOOP
          ord := -i;
          from_usd := NULL;
          from_sats := NULL;
          SELECT s.outcome, s.wallet_usd, s.wallet_sats INTO outcome, wallet_usd, wallet_sats
            FROM spendgate_settle(req->>'accountId', req->>'reservationId', (req->>'actual')::numeric,
              req->>'transactionId', req->>'auditId', req->>'description', (req->>'now')::timestamptz) AS s;
          RETURN NEXT;
        END LOOP;
        FOR req, i IN SELECT e, n FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS t (e, n) LOOP
          ord := i;
          wallet_usd := NULL;
          wallet_sats := NULL;
          SELECT r.outcome, r.from_usd, r.from_sats INTO outcome, from_usd, from_sats
            FROM spendgate_reserve(req->>'accountId', req->>'agentId', req->>'reservationId', req->>'auditId',
              req->>'capability', req->>'provider', (req->>'quoted')::bigint, (req->>'rate')::bigint, req->>'day',
              (req->>'now')::timestamptz, (req->>'expiresAt')::timestamptz, p_known_capabilities) AS r;
          IF outcome = 'held' THEN
            SELECT w.usd_micro, w.sats_msat INTO wallet_usd, wallet_sats FROM wallets w
              WHERE w.account_id = req->>'accountId';
          END IF;
          RETURN NEXT;
          EXIT WHEN outcome <> 'held';
        END LOOP;
      END
      $$`)
  }),
  "0019_settle_lighter": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Settle and release lock the wallet row only, then read the reservation.
    // Every writer of a reservation holds its wallet's lock first (these
    // functions, the general path's lockHeld, the sweep), so under that lock
    // the row cannot change and needs no lock of its own; each statement of
    // these (volatile) functions reads a fresh snapshot, taken after the lock
    // was granted. Locking the reservation too (0014's join ... FOR UPDATE)
    // wrote a row lock to the heap and the WAL before the update wrote the
    // row again: about a quarter of a settle's time in the database
    // (docs/performance.md). Decisions and writes are 0014's, unchanged.
    //
    // A credit's key is unique per account; charges and refunds have none, so
    // the unique index now covers only the rows that have one (every charge
    // wrote an entry of NULLs to it before).
    yield* sql`ALTER TABLE transactions DROP CONSTRAINT transactions_account_id_credit_key_key`
    yield* sql`
      CREATE UNIQUE INDEX transactions_credit_key ON transactions (account_id, credit_key)
      WHERE credit_key IS NOT NULL`
    yield* sql.unsafe(`
      CREATE OR REPLACE FUNCTION spendgate_settle(
        p_account_id TEXT, p_reservation_id TEXT, p_actual NUMERIC, p_transaction_id TEXT, p_audit_id TEXT,
        p_description TEXT, p_now TIMESTAMPTZ,
        OUT outcome TEXT, OUT charged BIGINT, OUT charge_usd BIGINT, OUT charge_sats BIGINT,
        OUT wallet_usd BIGINT, OUT wallet_sats BIGINT,
        OUT r_id TEXT, OUT r_account_id TEXT, OUT r_agent_id TEXT, OUT r_capability TEXT, OUT r_provider TEXT,
        OUT r_quoted_micro_usd BIGINT, OUT r_held_usd_micro BIGINT, OUT r_held_sats_msat BIGINT,
        OUT r_rate_micro_usd_per_btc BIGINT, OUT r_day TEXT, OUT r_status TEXT, OUT r_settled_micro_usd BIGINT,
        OUT r_created_at TIMESTAMPTZ, OUT r_expires_at TIMESTAMPTZ
      ) LANGUAGE plpgsql AS $$
      DECLARE
        w_seq BIGINT;
        w_head TEXT;
        r reservations%ROWTYPE;
        remainder NUMERIC;
        seq BIGINT;
        details TEXT;
        hash TEXT;
      BEGIN
        SELECT audit_seq, audit_head INTO w_seq, w_head FROM wallets WHERE account_id = p_account_id FOR UPDATE;
        IF NOT FOUND THEN outcome := 'NotHeld'; RETURN; END IF;
        SELECT * INTO r FROM reservations WHERE id = p_reservation_id AND account_id = p_account_id;
        IF NOT FOUND THEN outcome := 'NotHeld'; RETURN; END IF;
        r_id := r.id; r_account_id := r.account_id; r_agent_id := r.agent_id; r_capability := r.capability;
        r_provider := r.provider; r_quoted_micro_usd := r.quoted_micro_usd; r_held_usd_micro := r.held_usd_micro;
        r_held_sats_msat := r.held_sats_msat; r_rate_micro_usd_per_btc := r.rate_micro_usd_per_btc; r_day := r.day;
        r_status := r.status; r_settled_micro_usd := r.settled_micro_usd; r_created_at := r.created_at;
        r_expires_at := r.expires_at;
        IF r.status = 'released' AND r.settled_micro_usd IS NULL THEN outcome := 'slow'; RETURN; END IF;
        IF r.status <> 'held' THEN outcome := 'NotHeld'; RETURN; END IF;
        charged := GREATEST(0, LEAST(p_actual, r.quoted_micro_usd));
        charge_usd := LEAST(charged, r.held_usd_micro);
        remainder := charged - charge_usd;
        charge_sats := 0;
        IF remainder > 0 AND r.rate_micro_usd_per_btc IS NOT NULL THEN
          charge_sats := LEAST(r.held_sats_msat,
            div(remainder * 100000000000 + r.rate_micro_usd_per_btc - 1, r.rate_micro_usd_per_btc));
        END IF;
        seq := w_seq + 1;
        details := '{"capability":' || to_json(r.capability)::text || ',"provider":' || to_json(r.provider)::text || '}';
        hash := spendgate_audit_hash(p_audit_id, p_account_id, seq, 'settle', r.agent_id, r.id, p_transaction_id,
          charged, r.held_usd_micro - charge_usd, r.held_sats_msat - charge_sats, details, p_now, w_head);
        INSERT INTO audit_log (id, account_id, seq, kind, agent_id, reservation_id, transaction_id, amount_micro_usd,
            usd_delta_micro, sats_delta_msat, details, created_at, prev_hash, hash)
          VALUES (p_audit_id, p_account_id, seq, 'settle', r.agent_id, r.id, p_transaction_id, charged,
            r.held_usd_micro - charge_usd, r.held_sats_msat - charge_sats, details, p_now, w_head, hash);
        UPDATE reservations SET status = 'settled', settled_micro_usd = charged WHERE id = r.id;
        UPDATE agent_daily_spend SET spent_micro_usd = spent_micro_usd - (r.quoted_micro_usd - charged)
          WHERE agent_id = r.agent_id AND day = r.day;
        INSERT INTO transactions (id, account_id, agent_id, type, amount_micro_usd, usd_micro, sats_msat,
            rate_micro_usd_per_btc, description, capability, provider, audit_id, refund_of, credit_key, created_at)
          VALUES (p_transaction_id, p_account_id, r.agent_id, 'charge', charged, charge_usd, charge_sats,
            r.rate_micro_usd_per_btc, p_description, r.capability, r.provider, p_audit_id, NULL, NULL, p_now);
        UPDATE wallets SET usd_micro = usd_micro + (r.held_usd_micro - charge_usd),
            sats_msat = sats_msat + (r.held_sats_msat - charge_sats), audit_seq = seq, audit_head = hash
          WHERE account_id = p_account_id
          RETURNING usd_micro, sats_msat INTO wallet_usd, wallet_sats;
        outcome := 'Settled';
      END
      $$`)
    yield* sql.unsafe(`
      CREATE OR REPLACE FUNCTION spendgate_release(
        p_account_id TEXT, p_reservation_id TEXT, p_audit_id TEXT, p_reason TEXT, p_now TIMESTAMPTZ
      ) RETURNS TEXT LANGUAGE plpgsql AS $$
      DECLARE
        w_seq BIGINT;
        w_head TEXT;
        r reservations%ROWTYPE;
        seq BIGINT;
        details TEXT;
        hash TEXT;
      BEGIN
        SELECT audit_seq, audit_head INTO w_seq, w_head FROM wallets WHERE account_id = p_account_id FOR UPDATE;
        IF NOT FOUND THEN RETURN 'NotHeld'; END IF;
        SELECT * INTO r FROM reservations WHERE id = p_reservation_id AND account_id = p_account_id;
        IF NOT FOUND OR r.status <> 'held' THEN RETURN 'NotHeld'; END IF;
        seq := w_seq + 1;
        details := '{"reason":' || to_json(p_reason)::text || '}';
        hash := spendgate_audit_hash(p_audit_id, p_account_id, seq, 'release', r.agent_id, r.id, NULL,
          r.quoted_micro_usd, r.held_usd_micro, r.held_sats_msat, details, p_now, w_head);
        INSERT INTO audit_log (id, account_id, seq, kind, agent_id, reservation_id, transaction_id, amount_micro_usd,
            usd_delta_micro, sats_delta_msat, details, created_at, prev_hash, hash)
          VALUES (p_audit_id, p_account_id, seq, 'release', r.agent_id, r.id, NULL, r.quoted_micro_usd,
            r.held_usd_micro, r.held_sats_msat, details, p_now, w_head, hash);
        UPDATE reservations SET status = 'released' WHERE id = r.id;
        UPDATE agent_daily_spend SET spent_micro_usd = spent_micro_usd - r.quoted_micro_usd
          WHERE agent_id = r.agent_id AND day = r.day;
        UPDATE wallets SET usd_micro = usd_micro + r.held_usd_micro, sats_msat = sats_msat + r.held_sats_msat,
            audit_seq = seq, audit_head = hash
          WHERE account_id = p_account_id;
        RETURN 'Released';
      END
      $$`)
  }),
  "0020_ledger_batch_across_wallets": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // One call carries the holds (and queued settles) of several wallets
    // (adapters/sql/SqlLedger.ts). Every wallet is locked in account order,
    // byte order (COLLATE "C", whatever the database's collation), so two
    // such calls, or one and the settle writer's, never wait for each other's
    // locks the other way round: the settles and reserves are taken wallet by
    // wallet in that order, a wallet's settles before its reserves, each
    // kind in the order given. After the first reserve that is not held
    // (a refusal, or a hold for the general path) no further reserve is
    // decided in this call (the caller sends them again once that one is
    // recorded); settles still are. Answers as 0018's: settles with negative
    // ords, reserves with their positions, a held one with its wallet's
    // pockets after it. The caller sends the reserves already in that order.
    yield* sql.unsafe(`
      CREATE OR REPLACE FUNCTION spendgate_ledger_batch(p_settles JSONB, p_requests JSONB, p_known_capabilities TEXT)
      RETURNS TABLE (ord BIGINT, outcome TEXT, from_usd BIGINT, from_sats BIGINT, wallet_usd BIGINT, wallet_sats BIGINT)
      LANGUAGE plpgsql AS $$
      DECLARE
        kind INT;
        req JSONB;
        i BIGINT;
        stopped BOOLEAN := false;
      BEGIN
        FOR kind, req, i IN
          SELECT k, e, n FROM (
            SELECT 0 AS k, e, n FROM jsonb_array_elements(p_settles) WITH ORDINALITY AS s (e, n)
            UNION ALL
            SELECT 1 AS k, e, n FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS r (e, n)
          ) AS items
          ORDER BY e->>'accountId' COLLATE "C", k, n
        LOOP
          IF kind = 0 THEN
            ord := -i;
            from_usd := NULL;
            from_sats := NULL;
            SELECT s.outcome, s.wallet_usd, s.wallet_sats INTO outcome, wallet_usd, wallet_sats
              FROM spendgate_settle(req->>'accountId', req->>'reservationId', (req->>'actual')::numeric,
                req->>'transactionId', req->>'auditId', req->>'description', (req->>'now')::timestamptz) AS s;
            RETURN NEXT;
            CONTINUE;
          END IF;
          CONTINUE WHEN stopped;
          ord := i;
          wallet_usd := NULL;
          wallet_sats := NULL;
          SELECT r.outcome, r.from_usd, r.from_sats INTO outcome, from_usd, from_sats
            FROM spendgate_reserve(req->>'accountId', req->>'agentId', req->>'reservationId', req->>'auditId',
              req->>'capability', req->>'provider', (req->>'quoted')::bigint, (req->>'rate')::bigint, req->>'day',
              (req->>'now')::timestamptz, (req->>'expiresAt')::timestamptz, p_known_capabilities) AS r;
          IF outcome = 'held' THEN
            SELECT w.usd_micro, w.sats_msat INTO wallet_usd, wallet_sats FROM wallets w
              WHERE w.account_id = req->>'accountId';
          ELSE
            stopped := true;
          END IF;
          RETURN NEXT;
        END LOOP;
      END
      $$`)
  }),
  "0021_hold_alone": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // A lone reserve with no settle carried (nearly every call of a hot
    // wallet at low load) is sent to this function with typed arguments
    // (adapters/sql/SqlLedger.ts, holdAlone), not through
    // spendgate_ledger_batch's JSON document: parsing and looping over it
    // cost PostgreSQL about 0.05 ms a call (docs/performance.md, "Typed calls
    // for a lone hold or settle"). The decision and the writes are
    // spendgate_reserve's, unchanged; a held reserve is answered, as by the
    // batch, with the wallet's pockets after it (the receipt's balance).
    yield* sql.unsafe(`
      CREATE FUNCTION spendgate_hold(
        p_account_id TEXT, p_agent_id TEXT, p_reservation_id TEXT, p_audit_id TEXT,
        p_capability TEXT, p_provider TEXT, p_quoted BIGINT, p_rate BIGINT, p_day TEXT,
        p_now TIMESTAMPTZ, p_expires_at TIMESTAMPTZ, p_known_capabilities TEXT,
        OUT outcome TEXT, OUT from_usd BIGINT, OUT from_sats BIGINT, OUT wallet_usd BIGINT, OUT wallet_sats BIGINT
      ) LANGUAGE plpgsql AS $$
      BEGIN
        SELECT r.outcome, r.from_usd, r.from_sats INTO outcome, from_usd, from_sats
          FROM spendgate_reserve(p_account_id, p_agent_id, p_reservation_id, p_audit_id, p_capability, p_provider,
            p_quoted, p_rate, p_day, p_now, p_expires_at, p_known_capabilities) AS r;
        IF outcome = 'held' THEN
          SELECT w.usd_micro, w.sats_msat INTO wallet_usd, wallet_sats FROM wallets w WHERE w.account_id = p_account_id;
        END IF;
      END
      $$`)
  }),
  "0022_velocity_bound": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // spendgate_reserve as in 0014 but for the velocity checks: they read the
    // agent's reservations of the last hour at every hold, so a hold cost more
    // the more calls the agent made in that hour (docs/performance.md, "A
    // velocity limit's cost grows with the agent's last hour"). Now the
    // minute's calls are counted up to the limit only, and the hour's
    // reservations are read only when the day counters cannot show there is
    // room. The decisions are the same (test/adapters/sql/ledger-functions.property.test.ts).
    yield* sql.unsafe(`
      CREATE OR REPLACE FUNCTION spendgate_reserve(
        p_account_id TEXT, p_agent_id TEXT, p_reservation_id TEXT, p_audit_id TEXT,
        p_capability TEXT, p_provider TEXT, p_quoted BIGINT, p_rate BIGINT, p_day TEXT,
        p_now TIMESTAMPTZ, p_expires_at TIMESTAMPTZ, p_known_capabilities TEXT,
        OUT outcome TEXT, OUT from_usd BIGINT, OUT from_sats BIGINT
      ) LANGUAGE plpgsql AS $$
      DECLARE
        w wallets%ROWTYPE;
        a agents%ROWTYPE;
        daily NUMERIC;
        monthly NUMERIC;
        allowed TEXT[];
        hour_spent NUMERIC;
        minute_calls BIGINT;
        cap_threshold NUMERIC;
        value_before NUMERIC;
        value_after NUMERIC;
        seq BIGINT;
        details TEXT;
        hash TEXT;
      BEGIN
        from_usd := 0;
        from_sats := 0;
        SELECT * INTO w FROM wallets WHERE account_id = p_account_id FOR UPDATE;
        IF NOT FOUND THEN outcome := 'slow'; RETURN; END IF;
        SELECT * INTO a FROM agents WHERE id = p_agent_id AND account_id = p_account_id;
        IF NOT FOUND THEN outcome := 'slow'; RETURN; END IF;
        -- The day's and the calendar month's spend, as the store reads them (monthSpent).
        SELECT COALESCE((SELECT spent_micro_usd FROM agent_daily_spend WHERE agent_id = p_agent_id AND day = p_day), 0)
          INTO daily;
        SELECT COALESCE(SUM(spent_micro_usd), 0) INTO monthly FROM agent_daily_spend
          WHERE agent_id = p_agent_id AND day >= left(p_day, 7) || '-01' AND day <= left(p_day, 7) || '-31';

        IF a.killed OR a.deleted_at IS NOT NULL THEN outcome := 'AgentKilled'; RETURN; END IF;
        -- Stored capabilities the service does not know are ignored, as when the policy is read.
        allowed := ARRAY(SELECT c FROM unnest(string_to_array(a.allowed_capabilities, ',')) AS c
                         WHERE c = ANY (string_to_array(p_known_capabilities, ',')));
        IF cardinality(allowed) > 0 AND NOT (p_capability = ANY (allowed)) THEN
          outcome := 'CapabilityNotAllowed'; RETURN;
        END IF;
        IF a.max_per_call_micro_usd IS NOT NULL AND p_quoted > a.max_per_call_micro_usd THEN
          outcome := 'PerCallLimitExceeded'; RETURN;
        END IF;
        -- As the store's recentOf: reservations stamped after now count too.
        -- The minute's calls are counted only up to the limit (all the rule
        -- asks is whether they reach it).
        IF a.max_calls_per_minute IS NOT NULL THEN
          SELECT COUNT(*) INTO minute_calls FROM (
            SELECT 1 FROM reservations
              WHERE agent_id = p_agent_id AND created_at > p_now - interval '60 seconds'
              LIMIT a.max_calls_per_minute) m;
          IF minute_calls + 1 > a.max_calls_per_minute THEN
            outcome := 'CallRateExceeded'; RETURN;
          END IF;
        END IF;
        -- The last hour's spend is at most what the day counters of the day
        -- before this one and after hold (a reservation's day is the UTC day
        -- of its time, and a day's counter is at least what that day's
        -- reservations spend: holds raise both, settles and releases lower
        -- both alike, refunds neither); when that bound leaves room, the
        -- hour's reservations need not be read.
        IF a.max_per_hour_micro_usd IS NOT NULL THEN
          SELECT COALESCE(SUM(spent_micro_usd), 0) INTO hour_spent FROM agent_daily_spend
            WHERE agent_id = p_agent_id AND day >= to_char(p_day::date - 1, 'YYYY-MM-DD');
          IF hour_spent + p_quoted > a.max_per_hour_micro_usd THEN
            SELECT COALESCE(SUM(CASE WHEN status = 'held' THEN quoted_micro_usd
                                     WHEN status = 'settled' THEN COALESCE(settled_micro_usd, 0)
                                     ELSE 0 END), 0)
              INTO hour_spent
              FROM reservations
              WHERE agent_id = p_agent_id AND created_at > p_now - interval '3600 seconds';
            IF hour_spent + p_quoted > a.max_per_hour_micro_usd THEN
              outcome := 'VelocityExceeded'; RETURN;
            END IF;
          END IF;
        END IF;
        IF a.max_per_day_micro_usd IS NOT NULL AND daily + p_quoted > a.max_per_day_micro_usd THEN
          outcome := 'BudgetExceeded'; RETURN;
        END IF;
        IF a.max_per_month_micro_usd IS NOT NULL AND monthly + p_quoted > a.max_per_month_micro_usd THEN
          outcome := 'MonthlyBudgetExceeded'; RETURN;
        END IF;

        IF w.usd_micro >= p_quoted THEN
          from_usd := p_quoted;
        ELSIF p_rate IS NULL THEN
          outcome := CASE WHEN w.sats_msat > 0 THEN 'RateUnavailable' ELSE 'InsufficientBalance' END;
          RETURN;
        ELSE
          -- usd first, the rest in sats at the rate, rounded up to the msat.
          from_usd := w.usd_micro;
          from_sats := div((p_quoted - w.usd_micro)::numeric * 100000000000 + p_rate - 1, p_rate);
          IF from_sats > w.sats_msat THEN
            from_usd := 0; from_sats := 0;
            outcome := 'InsufficientBalance'; RETURN;
          END IF;
        END IF;

        -- A hold that fires a webhook event (src/webhooks/spendEvents.ts) takes the general path.
        IF a.max_per_day_micro_usd IS NOT NULL THEN
          cap_threshold := div(a.max_per_day_micro_usd::numeric * 80, 100);
          IF (daily < cap_threshold AND daily + p_quoted >= cap_threshold)
             OR daily + p_quoted >= a.max_per_day_micro_usd THEN
            from_usd := 0; from_sats := 0;
            outcome := 'slow'; RETURN;
          END IF;
        END IF;
        IF w.low_balance_threshold_micro_usd IS NOT NULL THEN
          value_before := w.usd_micro + CASE WHEN p_rate IS NULL THEN 0
            ELSE div(w.sats_msat::numeric * p_rate, 100000000000) END;
          value_after := (w.usd_micro - from_usd) + CASE WHEN p_rate IS NULL THEN 0
            ELSE div((w.sats_msat - from_sats)::numeric * p_rate, 100000000000) END;
          IF value_before >= w.low_balance_threshold_micro_usd AND value_after < w.low_balance_threshold_micro_usd THEN
            from_usd := 0; from_sats := 0;
            outcome := 'slow'; RETURN;
          END IF;
        END IF;

        seq := w.audit_seq + 1;
        details := '{"capability":' || to_json(p_capability)::text || ',"provider":' || to_json(p_provider)::text || '}';
        hash := spendgate_audit_hash(p_audit_id, p_account_id, seq, 'reserve', p_agent_id, p_reservation_id, NULL,
          p_quoted, -from_usd, -from_sats, details, p_now, w.audit_head);
        INSERT INTO audit_log (id, account_id, seq, kind, agent_id, reservation_id, transaction_id, amount_micro_usd,
            usd_delta_micro, sats_delta_msat, details, created_at, prev_hash, hash)
          VALUES (p_audit_id, p_account_id, seq, 'reserve', p_agent_id, p_reservation_id, NULL, p_quoted,
            -from_usd, -from_sats, details, p_now, w.audit_head, hash);
        INSERT INTO reservations (id, account_id, agent_id, capability, provider, quoted_micro_usd, held_usd_micro,
            held_sats_msat, rate_micro_usd_per_btc, day, status, settled_micro_usd, created_at, expires_at)
          VALUES (p_reservation_id, p_account_id, p_agent_id, p_capability, p_provider, p_quoted, from_usd,
            from_sats, p_rate, p_day, 'held', NULL, p_now, p_expires_at);
        INSERT INTO agent_daily_spend (agent_id, day, spent_micro_usd) VALUES (p_agent_id, p_day, p_quoted)
          ON CONFLICT (agent_id, day) DO UPDATE SET spent_micro_usd = agent_daily_spend.spent_micro_usd + p_quoted;
        UPDATE wallets SET usd_micro = usd_micro - from_usd, sats_msat = sats_msat - from_sats,
            audit_seq = seq, audit_head = hash
          WHERE account_id = p_account_id;
        outcome := 'held';
      END
      $$`)
  }),
  "0023_velocity_hours": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // The day counter of an agent with an hourly limit also keeps its spend
    // by UTC hour, in µUSD (hours_micro_usd[1] is 00:00 - 00:59,
    // hours_micro_usd[24] 23:00 - 23:59; their sum is spent_micro_usd),
    // raised and lowered with it on every write.
    // 0022 bounded the last hour's spend by two days' counters, which a busy
    // agent under an hourly limit soon outgrows: from then on each of its
    // holds read the hour's reservations. The bound is now the hours from an
    // hour ago on (docs/performance.md, "A velocity limit bounded by the
    // hour"). hours_micro_usd is NULL where a day's spend is not all counted by the
    // hour: rows written before this migration, days with a hold of the
    // agent while it had no hourly limit (such holds skip the hours' cost).
    // Those days count whole, as in 0022. The decisions are the same
    // (test/adapters/sql/ledger-functions.property.test.ts).
    yield* sql`ALTER TABLE agent_daily_spend ADD COLUMN hours_micro_usd BIGINT[]`
    // The hours with a delta added to one hour (0 - 23); NULL (a day counted before its hours were) stays NULL.
    yield* sql.unsafe(`
      CREATE FUNCTION spendgate_hours_add(p_hours BIGINT[], p_hour INT, p_delta BIGINT) RETURNS BIGINT[]
      LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE WHEN p_hours IS NULL THEN NULL
          ELSE p_hours[1:p_hour] || (p_hours[p_hour + 1] + p_delta) || p_hours[p_hour + 2:24] END
      $$`)
    yield* sql.unsafe(`
      CREATE OR REPLACE FUNCTION spendgate_reserve(
        p_account_id TEXT, p_agent_id TEXT, p_reservation_id TEXT, p_audit_id TEXT,
        p_capability TEXT, p_provider TEXT, p_quoted BIGINT, p_rate BIGINT, p_day TEXT,
        p_now TIMESTAMPTZ, p_expires_at TIMESTAMPTZ, p_known_capabilities TEXT,
        OUT outcome TEXT, OUT from_usd BIGINT, OUT from_sats BIGINT
      ) LANGUAGE plpgsql AS $$
      DECLARE
        w wallets%ROWTYPE;
        a agents%ROWTYPE;
        daily NUMERIC;
        monthly NUMERIC;
        allowed TEXT[];
        hour_spent NUMERIC;
        hour_from TIMESTAMP;
        hour_from_day TEXT;
        hour_of_day INT;
        minute_calls BIGINT;
        cap_threshold NUMERIC;
        value_before NUMERIC;
        value_after NUMERIC;
        seq BIGINT;
        details TEXT;
        hash TEXT;
      BEGIN
        from_usd := 0;
        from_sats := 0;
        SELECT * INTO w FROM wallets WHERE account_id = p_account_id FOR UPDATE;
        IF NOT FOUND THEN outcome := 'slow'; RETURN; END IF;
        SELECT * INTO a FROM agents WHERE id = p_agent_id AND account_id = p_account_id;
        IF NOT FOUND THEN outcome := 'slow'; RETURN; END IF;
        -- The day's and the calendar month's spend, as the store reads them (monthSpent).
        SELECT COALESCE((SELECT spent_micro_usd FROM agent_daily_spend WHERE agent_id = p_agent_id AND day = p_day), 0)
          INTO daily;
        SELECT COALESCE(SUM(spent_micro_usd), 0) INTO monthly FROM agent_daily_spend
          WHERE agent_id = p_agent_id AND day >= left(p_day, 7) || '-01' AND day <= left(p_day, 7) || '-31';

        IF a.killed OR a.deleted_at IS NOT NULL THEN outcome := 'AgentKilled'; RETURN; END IF;
        -- Stored capabilities the service does not know are ignored, as when the policy is read.
        allowed := ARRAY(SELECT c FROM unnest(string_to_array(a.allowed_capabilities, ',')) AS c
                         WHERE c = ANY (string_to_array(p_known_capabilities, ',')));
        IF cardinality(allowed) > 0 AND NOT (p_capability = ANY (allowed)) THEN
          outcome := 'CapabilityNotAllowed'; RETURN;
        END IF;
        IF a.max_per_call_micro_usd IS NOT NULL AND p_quoted > a.max_per_call_micro_usd THEN
          outcome := 'PerCallLimitExceeded'; RETURN;
        END IF;
        -- As the store's recentOf: reservations stamped after now count too.
        -- The minute's calls are counted only up to the limit (all the rule
        -- asks is whether they reach it).
        IF a.max_calls_per_minute IS NOT NULL THEN
          SELECT COUNT(*) INTO minute_calls FROM (
            SELECT 1 FROM reservations
              WHERE agent_id = p_agent_id AND created_at > p_now - interval '60 seconds'
              LIMIT a.max_calls_per_minute) m;
          IF minute_calls + 1 > a.max_calls_per_minute THEN
            outcome := 'CallRateExceeded'; RETURN;
          END IF;
        END IF;
        -- The last hour's spend is at most what the counters hold from the
        -- UTC hour an hour ago on: that hour's and the later ones of its
        -- day's hour counters, and every later day's counter (a reservation's
        -- day and hour are the UTC day and hour of its time, and a counter is
        -- at least what its reservations spend: holds raise it, settles and
        -- releases lower it alike, refunds neither). A day counted before its
        -- hours were (hours_micro_usd IS NULL: written before this migration) counts
        -- whole. When that bound leaves room, the hour's reservations need not
        -- be read.
        IF a.max_per_hour_micro_usd IS NOT NULL THEN
          hour_from := (p_now - interval '3600 seconds') AT TIME ZONE 'UTC';
          hour_from_day := to_char(hour_from, 'YYYY-MM-DD');
          hour_of_day := extract(hour FROM hour_from)::int;
          SELECT COALESCE(SUM(CASE WHEN day = hour_from_day AND hours_micro_usd IS NOT NULL
                                   THEN (SELECT COALESCE(SUM(h), 0) FROM unnest(hours_micro_usd[hour_of_day + 1:24]) AS h)
                                   ELSE spent_micro_usd END), 0)
            INTO hour_spent FROM agent_daily_spend
            WHERE agent_id = p_agent_id AND day >= hour_from_day;
          IF hour_spent + p_quoted > a.max_per_hour_micro_usd THEN
            SELECT COALESCE(SUM(CASE WHEN status = 'held' THEN quoted_micro_usd
                                     WHEN status = 'settled' THEN COALESCE(settled_micro_usd, 0)
                                     ELSE 0 END), 0)
              INTO hour_spent
              FROM reservations
              WHERE agent_id = p_agent_id AND created_at > p_now - interval '3600 seconds';
            IF hour_spent + p_quoted > a.max_per_hour_micro_usd THEN
              outcome := 'VelocityExceeded'; RETURN;
            END IF;
          END IF;
        END IF;
        IF a.max_per_day_micro_usd IS NOT NULL AND daily + p_quoted > a.max_per_day_micro_usd THEN
          outcome := 'BudgetExceeded'; RETURN;
        END IF;
        IF a.max_per_month_micro_usd IS NOT NULL AND monthly + p_quoted > a.max_per_month_micro_usd THEN
          outcome := 'MonthlyBudgetExceeded'; RETURN;
        END IF;

        IF w.usd_micro >= p_quoted THEN
          from_usd := p_quoted;
        ELSIF p_rate IS NULL THEN
          outcome := CASE WHEN w.sats_msat > 0 THEN 'RateUnavailable' ELSE 'InsufficientBalance' END;
          RETURN;
        ELSE
          -- usd first, the rest in sats at the rate, rounded up to the msat.
          from_usd := w.usd_micro;
          from_sats := div((p_quoted - w.usd_micro)::numeric * 100000000000 + p_rate - 1, p_rate);
          IF from_sats > w.sats_msat THEN
            from_usd := 0; from_sats := 0;
            outcome := 'InsufficientBalance'; RETURN;
          END IF;
        END IF;

        -- A hold that fires a webhook event (src/webhooks/spendEvents.ts) takes the general path.
        IF a.max_per_day_micro_usd IS NOT NULL THEN
          cap_threshold := div(a.max_per_day_micro_usd::numeric * 80, 100);
          IF (daily < cap_threshold AND daily + p_quoted >= cap_threshold)
             OR daily + p_quoted >= a.max_per_day_micro_usd THEN
            from_usd := 0; from_sats := 0;
            outcome := 'slow'; RETURN;
          END IF;
        END IF;
        IF w.low_balance_threshold_micro_usd IS NOT NULL THEN
          value_before := w.usd_micro + CASE WHEN p_rate IS NULL THEN 0
            ELSE div(w.sats_msat::numeric * p_rate, 100000000000) END;
          value_after := (w.usd_micro - from_usd) + CASE WHEN p_rate IS NULL THEN 0
            ELSE div((w.sats_msat - from_sats)::numeric * p_rate, 100000000000) END;
          IF value_before >= w.low_balance_threshold_micro_usd AND value_after < w.low_balance_threshold_micro_usd THEN
            from_usd := 0; from_sats := 0;
            outcome := 'slow'; RETURN;
          END IF;
        END IF;

        seq := w.audit_seq + 1;
        details := '{"capability":' || to_json(p_capability)::text || ',"provider":' || to_json(p_provider)::text || '}';
        hash := spendgate_audit_hash(p_audit_id, p_account_id, seq, 'reserve', p_agent_id, p_reservation_id, NULL,
          p_quoted, -from_usd, -from_sats, details, p_now, w.audit_head);
        INSERT INTO audit_log (id, account_id, seq, kind, agent_id, reservation_id, transaction_id, amount_micro_usd,
            usd_delta_micro, sats_delta_msat, details, created_at, prev_hash, hash)
          VALUES (p_audit_id, p_account_id, seq, 'reserve', p_agent_id, p_reservation_id, NULL, p_quoted,
            -from_usd, -from_sats, details, p_now, w.audit_head, hash);
        INSERT INTO reservations (id, account_id, agent_id, capability, provider, quoted_micro_usd, held_usd_micro,
            held_sats_msat, rate_micro_usd_per_btc, day, status, settled_micro_usd, created_at, expires_at)
          VALUES (p_reservation_id, p_account_id, p_agent_id, p_capability, p_provider, p_quoted, from_usd,
            from_sats, p_rate, p_day, 'held', NULL, p_now, p_expires_at);
        -- Only an agent with an hourly limit has its day counted by the hour;
        -- any other hold leaves its day's hours NULL (incomplete: counted whole).
        IF a.max_per_hour_micro_usd IS NOT NULL THEN
          hour_of_day := extract(hour FROM p_now AT TIME ZONE 'UTC')::int;
          INSERT INTO agent_daily_spend (agent_id, day, spent_micro_usd, hours_micro_usd)
            VALUES (p_agent_id, p_day, p_quoted,
              array_fill(0::bigint, ARRAY[hour_of_day]) || p_quoted || array_fill(0::bigint, ARRAY[23 - hour_of_day]))
            ON CONFLICT (agent_id, day) DO UPDATE SET spent_micro_usd = agent_daily_spend.spent_micro_usd + p_quoted,
              hours_micro_usd = spendgate_hours_add(agent_daily_spend.hours_micro_usd, hour_of_day, p_quoted);
        ELSE
          INSERT INTO agent_daily_spend (agent_id, day, spent_micro_usd) VALUES (p_agent_id, p_day, p_quoted)
            ON CONFLICT (agent_id, day) DO UPDATE SET spent_micro_usd = agent_daily_spend.spent_micro_usd + p_quoted,
              hours_micro_usd = NULL;
        END IF;
        UPDATE wallets SET usd_micro = usd_micro - from_usd, sats_msat = sats_msat - from_sats,
            audit_seq = seq, audit_head = hash
          WHERE account_id = p_account_id;
        outcome := 'held';
      END
      $$`)
    yield* sql.unsafe(`
      CREATE OR REPLACE FUNCTION spendgate_settle(
        p_account_id TEXT, p_reservation_id TEXT, p_actual NUMERIC, p_transaction_id TEXT, p_audit_id TEXT,
        p_description TEXT, p_now TIMESTAMPTZ,
        OUT outcome TEXT, OUT charged BIGINT, OUT charge_usd BIGINT, OUT charge_sats BIGINT,
        OUT wallet_usd BIGINT, OUT wallet_sats BIGINT,
        OUT r_id TEXT, OUT r_account_id TEXT, OUT r_agent_id TEXT, OUT r_capability TEXT, OUT r_provider TEXT,
        OUT r_quoted_micro_usd BIGINT, OUT r_held_usd_micro BIGINT, OUT r_held_sats_msat BIGINT,
        OUT r_rate_micro_usd_per_btc BIGINT, OUT r_day TEXT, OUT r_status TEXT, OUT r_settled_micro_usd BIGINT,
        OUT r_created_at TIMESTAMPTZ, OUT r_expires_at TIMESTAMPTZ
      ) LANGUAGE plpgsql AS $$
      DECLARE
        w_seq BIGINT;
        w_head TEXT;
        r reservations%ROWTYPE;
        remainder NUMERIC;
        seq BIGINT;
        details TEXT;
        hash TEXT;
      BEGIN
        SELECT audit_seq, audit_head INTO w_seq, w_head FROM wallets WHERE account_id = p_account_id FOR UPDATE;
        IF NOT FOUND THEN outcome := 'NotHeld'; RETURN; END IF;
        SELECT * INTO r FROM reservations WHERE id = p_reservation_id AND account_id = p_account_id;
        IF NOT FOUND THEN outcome := 'NotHeld'; RETURN; END IF;
        r_id := r.id; r_account_id := r.account_id; r_agent_id := r.agent_id; r_capability := r.capability;
        r_provider := r.provider; r_quoted_micro_usd := r.quoted_micro_usd; r_held_usd_micro := r.held_usd_micro;
        r_held_sats_msat := r.held_sats_msat; r_rate_micro_usd_per_btc := r.rate_micro_usd_per_btc; r_day := r.day;
        r_status := r.status; r_settled_micro_usd := r.settled_micro_usd; r_created_at := r.created_at;
        r_expires_at := r.expires_at;
        IF r.status = 'released' AND r.settled_micro_usd IS NULL THEN outcome := 'slow'; RETURN; END IF;
        IF r.status <> 'held' THEN outcome := 'NotHeld'; RETURN; END IF;
        charged := GREATEST(0, LEAST(p_actual, r.quoted_micro_usd));
        charge_usd := LEAST(charged, r.held_usd_micro);
        remainder := charged - charge_usd;
        charge_sats := 0;
        IF remainder > 0 AND r.rate_micro_usd_per_btc IS NOT NULL THEN
          charge_sats := LEAST(r.held_sats_msat,
            div(remainder * 100000000000 + r.rate_micro_usd_per_btc - 1, r.rate_micro_usd_per_btc));
        END IF;
        seq := w_seq + 1;
        details := '{"capability":' || to_json(r.capability)::text || ',"provider":' || to_json(r.provider)::text || '}';
        hash := spendgate_audit_hash(p_audit_id, p_account_id, seq, 'settle', r.agent_id, r.id, p_transaction_id,
          charged, r.held_usd_micro - charge_usd, r.held_sats_msat - charge_sats, details, p_now, w_head);
        INSERT INTO audit_log (id, account_id, seq, kind, agent_id, reservation_id, transaction_id, amount_micro_usd,
            usd_delta_micro, sats_delta_msat, details, created_at, prev_hash, hash)
          VALUES (p_audit_id, p_account_id, seq, 'settle', r.agent_id, r.id, p_transaction_id, charged,
            r.held_usd_micro - charge_usd, r.held_sats_msat - charge_sats, details, p_now, w_head, hash);
        UPDATE reservations SET status = 'settled', settled_micro_usd = charged WHERE id = r.id;
        UPDATE agent_daily_spend SET spent_micro_usd = spent_micro_usd - (r.quoted_micro_usd - charged),
            hours_micro_usd = spendgate_hours_add(hours_micro_usd, extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int, charged - r.quoted_micro_usd)
          WHERE agent_id = r.agent_id AND day = r.day;
        INSERT INTO transactions (id, account_id, agent_id, type, amount_micro_usd, usd_micro, sats_msat,
            rate_micro_usd_per_btc, description, capability, provider, audit_id, refund_of, credit_key, created_at)
          VALUES (p_transaction_id, p_account_id, r.agent_id, 'charge', charged, charge_usd, charge_sats,
            r.rate_micro_usd_per_btc, p_description, r.capability, r.provider, p_audit_id, NULL, NULL, p_now);
        UPDATE wallets SET usd_micro = usd_micro + (r.held_usd_micro - charge_usd),
            sats_msat = sats_msat + (r.held_sats_msat - charge_sats), audit_seq = seq, audit_head = hash
          WHERE account_id = p_account_id
          RETURNING usd_micro, sats_msat INTO wallet_usd, wallet_sats;
        outcome := 'Settled';
      END
      $$`)
    yield* sql.unsafe(`
      CREATE OR REPLACE FUNCTION spendgate_release(
        p_account_id TEXT, p_reservation_id TEXT, p_audit_id TEXT, p_reason TEXT, p_now TIMESTAMPTZ
      ) RETURNS TEXT LANGUAGE plpgsql AS $$
      DECLARE
        w_seq BIGINT;
        w_head TEXT;
        r reservations%ROWTYPE;
        seq BIGINT;
        details TEXT;
        hash TEXT;
      BEGIN
        SELECT audit_seq, audit_head INTO w_seq, w_head FROM wallets WHERE account_id = p_account_id FOR UPDATE;
        IF NOT FOUND THEN RETURN 'NotHeld'; END IF;
        SELECT * INTO r FROM reservations WHERE id = p_reservation_id AND account_id = p_account_id;
        IF NOT FOUND OR r.status <> 'held' THEN RETURN 'NotHeld'; END IF;
        seq := w_seq + 1;
        details := '{"reason":' || to_json(p_reason)::text || '}';
        hash := spendgate_audit_hash(p_audit_id, p_account_id, seq, 'release', r.agent_id, r.id, NULL,
          r.quoted_micro_usd, r.held_usd_micro, r.held_sats_msat, details, p_now, w_head);
        INSERT INTO audit_log (id, account_id, seq, kind, agent_id, reservation_id, transaction_id, amount_micro_usd,
            usd_delta_micro, sats_delta_msat, details, created_at, prev_hash, hash)
          VALUES (p_audit_id, p_account_id, seq, 'release', r.agent_id, r.id, NULL, r.quoted_micro_usd,
            r.held_usd_micro, r.held_sats_msat, details, p_now, w_head, hash);
        UPDATE reservations SET status = 'released' WHERE id = r.id;
        UPDATE agent_daily_spend SET spent_micro_usd = spent_micro_usd - r.quoted_micro_usd,
            hours_micro_usd = spendgate_hours_add(hours_micro_usd, extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int, -r.quoted_micro_usd)
          WHERE agent_id = r.agent_id AND day = r.day;
        UPDATE wallets SET usd_micro = usd_micro + r.held_usd_micro, sats_msat = sats_msat + r.held_sats_msat,
            audit_seq = seq, audit_head = hash
          WHERE account_id = p_account_id;
        RETURN 'Released';
      END
      $$`)
  }),
  "0024_hold_fewer_statements": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // 0023's reserve, with the reads a hold's decision does not need left
    // out: the day's counter only under a daily limit, the month's counters
    // (up to 31 rows) only under a monthly one, the allowed capabilities'
    // array only when the agent has a list. An agent with none of them ran
    // three statements a hold for nothing. The decisions and the writes are
    // unchanged (test/adapters/sql/ledger-functions.property.test.ts;
    // docs/performance.md, "A hold's needless reads").
    yield* sql.unsafe(`
      CREATE OR REPLACE FUNCTION spendgate_reserve(
        p_account_id TEXT, p_agent_id TEXT, p_reservation_id TEXT, p_audit_id TEXT,
        p_capability TEXT, p_provider TEXT, p_quoted BIGINT, p_rate BIGINT, p_day TEXT,
        p_now TIMESTAMPTZ, p_expires_at TIMESTAMPTZ, p_known_capabilities TEXT,
        OUT outcome TEXT, OUT from_usd BIGINT, OUT from_sats BIGINT
      ) LANGUAGE plpgsql AS $$
      DECLARE
        w wallets%ROWTYPE;
        a agents%ROWTYPE;
        daily NUMERIC;
        monthly NUMERIC;
        allowed TEXT[];
        hour_spent NUMERIC;
        hour_from TIMESTAMP;
        hour_from_day TEXT;
        hour_of_day INT;
        minute_calls BIGINT;
        cap_threshold NUMERIC;
        value_before NUMERIC;
        value_after NUMERIC;
        seq BIGINT;
        details TEXT;
        hash TEXT;
      BEGIN
        from_usd := 0;
        from_sats := 0;
        SELECT * INTO w FROM wallets WHERE account_id = p_account_id FOR UPDATE;
        IF NOT FOUND THEN outcome := 'slow'; RETURN; END IF;
        SELECT * INTO a FROM agents WHERE id = p_agent_id AND account_id = p_account_id;
        IF NOT FOUND THEN outcome := 'slow'; RETURN; END IF;
        -- The day's and the calendar month's spend, as the store reads them (monthSpent),
        -- read only under the limit that needs them.
        IF a.max_per_day_micro_usd IS NOT NULL THEN
          SELECT COALESCE((SELECT spent_micro_usd FROM agent_daily_spend WHERE agent_id = p_agent_id AND day = p_day), 0)
            INTO daily;
        END IF;
        IF a.max_per_month_micro_usd IS NOT NULL THEN
          SELECT COALESCE(SUM(spent_micro_usd), 0) INTO monthly FROM agent_daily_spend
            WHERE agent_id = p_agent_id AND day >= left(p_day, 7) || '-01' AND day <= left(p_day, 7) || '-31';
        END IF;

        IF a.killed OR a.deleted_at IS NOT NULL THEN outcome := 'AgentKilled'; RETURN; END IF;
        -- Stored capabilities the service does not know are ignored, as when the policy is read.
        IF a.allowed_capabilities <> '' THEN
          allowed := ARRAY(SELECT c FROM unnest(string_to_array(a.allowed_capabilities, ',')) AS c
                           WHERE c = ANY (string_to_array(p_known_capabilities, ',')));
          IF cardinality(allowed) > 0 AND NOT (p_capability = ANY (allowed)) THEN
            outcome := 'CapabilityNotAllowed'; RETURN;
          END IF;
        END IF;
        IF a.max_per_call_micro_usd IS NOT NULL AND p_quoted > a.max_per_call_micro_usd THEN
          outcome := 'PerCallLimitExceeded'; RETURN;
        END IF;
        -- As the store's recentOf: reservations stamped after now count too.
        -- The minute's calls are counted only up to the limit (all the rule
        -- asks is whether they reach it).
        IF a.max_calls_per_minute IS NOT NULL THEN
          SELECT COUNT(*) INTO minute_calls FROM (
            SELECT 1 FROM reservations
              WHERE agent_id = p_agent_id AND created_at > p_now - interval '60 seconds'
              LIMIT a.max_calls_per_minute) m;
          IF minute_calls + 1 > a.max_calls_per_minute THEN
            outcome := 'CallRateExceeded'; RETURN;
          END IF;
        END IF;
        -- The last hour's spend is at most what the counters hold from the
        -- UTC hour an hour ago on: that hour's and the later ones of its
        -- day's hour counters, and every later day's counter (a reservation's
        -- day and hour are the UTC day and hour of its time, and a counter is
        -- at least what its reservations spend: holds raise it, settles and
        -- releases lower it alike, refunds neither). A day counted before its
        -- hours were (hours_micro_usd IS NULL: written before this migration) counts
        -- whole. When that bound leaves room, the hour's reservations need not
        -- be read.
        IF a.max_per_hour_micro_usd IS NOT NULL THEN
          hour_from := (p_now - interval '3600 seconds') AT TIME ZONE 'UTC';
          hour_from_day := to_char(hour_from, 'YYYY-MM-DD');
          hour_of_day := extract(hour FROM hour_from)::int;
          SELECT COALESCE(SUM(CASE WHEN day = hour_from_day AND hours_micro_usd IS NOT NULL
                                   THEN (SELECT COALESCE(SUM(h), 0) FROM unnest(hours_micro_usd[hour_of_day + 1:24]) AS h)
                                   ELSE spent_micro_usd END), 0)
            INTO hour_spent FROM agent_daily_spend
            WHERE agent_id = p_agent_id AND day >= hour_from_day;
          IF hour_spent + p_quoted > a.max_per_hour_micro_usd THEN
            SELECT COALESCE(SUM(CASE WHEN status = 'held' THEN quoted_micro_usd
                                     WHEN status = 'settled' THEN COALESCE(settled_micro_usd, 0)
                                     ELSE 0 END), 0)
              INTO hour_spent
              FROM reservations
              WHERE agent_id = p_agent_id AND created_at > p_now - interval '3600 seconds';
            IF hour_spent + p_quoted > a.max_per_hour_micro_usd THEN
              outcome := 'VelocityExceeded'; RETURN;
            END IF;
          END IF;
        END IF;
        IF a.max_per_day_micro_usd IS NOT NULL AND daily + p_quoted > a.max_per_day_micro_usd THEN
          outcome := 'BudgetExceeded'; RETURN;
        END IF;
        IF a.max_per_month_micro_usd IS NOT NULL AND monthly + p_quoted > a.max_per_month_micro_usd THEN
          outcome := 'MonthlyBudgetExceeded'; RETURN;
        END IF;

        IF w.usd_micro >= p_quoted THEN
          from_usd := p_quoted;
        ELSIF p_rate IS NULL THEN
          outcome := CASE WHEN w.sats_msat > 0 THEN 'RateUnavailable' ELSE 'InsufficientBalance' END;
          RETURN;
        ELSE
          -- usd first, the rest in sats at the rate, rounded up to the msat.
          from_usd := w.usd_micro;
          from_sats := div((p_quoted - w.usd_micro)::numeric * 100000000000 + p_rate - 1, p_rate);
          IF from_sats > w.sats_msat THEN
            from_usd := 0; from_sats := 0;
            outcome := 'InsufficientBalance'; RETURN;
          END IF;
        END IF;

        -- A hold that fires a webhook event (src/webhooks/spendEvents.ts) takes the general path.
        IF a.max_per_day_micro_usd IS NOT NULL THEN
          cap_threshold := div(a.max_per_day_micro_usd::numeric * 80, 100);
          IF (daily < cap_threshold AND daily + p_quoted >= cap_threshold)
             OR daily + p_quoted >= a.max_per_day_micro_usd THEN
            from_usd := 0; from_sats := 0;
            outcome := 'slow'; RETURN;
          END IF;
        END IF;
        IF w.low_balance_threshold_micro_usd IS NOT NULL THEN
          value_before := w.usd_micro + CASE WHEN p_rate IS NULL THEN 0
            ELSE div(w.sats_msat::numeric * p_rate, 100000000000) END;
          value_after := (w.usd_micro - from_usd) + CASE WHEN p_rate IS NULL THEN 0
            ELSE div((w.sats_msat - from_sats)::numeric * p_rate, 100000000000) END;
          IF value_before >= w.low_balance_threshold_micro_usd AND value_after < w.low_balance_threshold_micro_usd THEN
            from_usd := 0; from_sats := 0;
            outcome := 'slow'; RETURN;
          END IF;
        END IF;

        seq := w.audit_seq + 1;
        details := '{"capability":' || to_json(p_capability)::text || ',"provider":' || to_json(p_provider)::text || '}';
        hash := spendgate_audit_hash(p_audit_id, p_account_id, seq, 'reserve', p_agent_id, p_reservation_id, NULL,
          p_quoted, -from_usd, -from_sats, details, p_now, w.audit_head);
        INSERT INTO audit_log (id, account_id, seq, kind, agent_id, reservation_id, transaction_id, amount_micro_usd,
            usd_delta_micro, sats_delta_msat, details, created_at, prev_hash, hash)
          VALUES (p_audit_id, p_account_id, seq, 'reserve', p_agent_id, p_reservation_id, NULL, p_quoted,
            -from_usd, -from_sats, details, p_now, w.audit_head, hash);
        INSERT INTO reservations (id, account_id, agent_id, capability, provider, quoted_micro_usd, held_usd_micro,
            held_sats_msat, rate_micro_usd_per_btc, day, status, settled_micro_usd, created_at, expires_at)
          VALUES (p_reservation_id, p_account_id, p_agent_id, p_capability, p_provider, p_quoted, from_usd,
            from_sats, p_rate, p_day, 'held', NULL, p_now, p_expires_at);
        -- Only an agent with an hourly limit has its day counted by the hour;
        -- any other hold leaves its day's hours NULL (incomplete: counted whole).
        IF a.max_per_hour_micro_usd IS NOT NULL THEN
          hour_of_day := extract(hour FROM p_now AT TIME ZONE 'UTC')::int;
          INSERT INTO agent_daily_spend (agent_id, day, spent_micro_usd, hours_micro_usd)
            VALUES (p_agent_id, p_day, p_quoted,
              array_fill(0::bigint, ARRAY[hour_of_day]) || p_quoted || array_fill(0::bigint, ARRAY[23 - hour_of_day]))
            ON CONFLICT (agent_id, day) DO UPDATE SET spent_micro_usd = agent_daily_spend.spent_micro_usd + p_quoted,
              hours_micro_usd = spendgate_hours_add(agent_daily_spend.hours_micro_usd, hour_of_day, p_quoted);
        ELSE
          INSERT INTO agent_daily_spend (agent_id, day, spent_micro_usd) VALUES (p_agent_id, p_day, p_quoted)
            ON CONFLICT (agent_id, day) DO UPDATE SET spent_micro_usd = agent_daily_spend.spent_micro_usd + p_quoted,
              hours_micro_usd = NULL;
        END IF;
        UPDATE wallets SET usd_micro = usd_micro - from_usd, sats_msat = sats_msat - from_sats,
            audit_seq = seq, audit_head = hash
          WHERE account_id = p_account_id;
        outcome := 'held';
      END
      $$`)
  })
}
