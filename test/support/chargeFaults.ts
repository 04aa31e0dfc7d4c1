import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * A fault injected into the ledger's SQL: a trigger that refuses the charge
 * rows (a settle's insert) of one account, or of every account when
 * `accountId` is not given. It refuses every such insert while it exists, or
 * with `once` only the first. It counts the inserts it has seen in the
 * sequence `<name>_seq`, which does not roll back with the refused
 * transaction. `name` must be new in the database.
 */
export const refuseCharges = (name: string, options: { readonly accountId?: string; readonly once?: boolean } = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const account = options.accountId === undefined ? "" : `NEW.account_id = '${options.accountId}' AND `
    const refuse = options.once === true ? `nextval('${name}_seq') = 1` : `nextval('${name}_seq') > 0`
    yield* sql.unsafe(`CREATE SEQUENCE ${name}_seq`)
    yield* sql.unsafe(`
      CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF ${account}NEW.type = 'charge' AND ${refuse} THEN
          RAISE EXCEPTION 'injected fault';
        END IF;
        RETURN NEW;
      END $$`)
    yield* sql.unsafe(`CREATE TRIGGER ${name} BEFORE INSERT ON transactions FOR EACH ROW EXECUTE FUNCTION ${name}()`)
    /** How many charge inserts of the account the trigger has seen so far. */
    const seen = Effect.map(
      sql<{ n: number | string; called: boolean }>`SELECT last_value AS n, is_called AS called FROM ${sql(`${name}_seq`)}`,
      (rows) => (rows[0]!.called ? Number(rows[0]!.n) : 0)
    )
    return {
      seen,
      /** How many times the database refused a charge so far. */
      refusals: options.once === true ? Effect.map(seen, (n) => Math.min(n, 1)) : seen,
      /** Drops the trigger: charges are written again. */
      lift: Effect.orDie(sql.unsafe(`DROP TRIGGER IF EXISTS ${name} ON transactions`))
    }
  })
