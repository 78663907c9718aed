import { createHash } from 'node:crypto'
import { GatewayError } from '../../errors.ts'
import type { PostgresRunner } from './postgres-connection.ts'
import { busTables } from './postgres-bus.ts'
import { ACTIVE, RUNNING, TASK_COLUMNS } from './postgres-rows.ts'

/** A schema name the store writes into statements as it is: a plain, unquoted SQL identifier. */
export const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * Ordered migrations of the store's schema `s` (already quoted): each step a list of statements, run in one
 * transaction with its row in `schema_migrations`. Never edit a released step; add one.
 * Times are epoch milliseconds (bigint) on the callers' clocks, except homes' expiry, on the server's clock.
 * JSON is kept as the text written (byte counts are of that text); ids sort bytewise (COLLATE "C"), as listing
 * orders them on every store.
 */
function migrations (s: string, schema: string): ReadonlyArray<readonly string[]> {
  return [
    [
      `CREATE TABLE ${s}.tasks (
         id text COLLATE "C" PRIMARY KEY,
         principal text COLLATE "C" NOT NULL,
         session_id text,
         era text NOT NULL,
         status text NOT NULL,
         status_message text,
         created_at bigint NOT NULL,
         last_updated_at bigint NOT NULL,
         ttl_ms bigint,
         expires_at bigint,
         poll_interval_ms bigint NOT NULL,
         upstream text COLLATE "C" NOT NULL,
         tool text COLLATE "C" NOT NULL,
         request text NOT NULL,
         progress_token text,
         client_capabilities text NOT NULL,
         outcome text,
         owner text COLLATE "C" NOT NULL,
         trace_context text,
         resume text,
         account text COLLATE "C" NOT NULL,
         bytes bigint NOT NULL DEFAULT 0
       )`,
      `CREATE INDEX tasks_principal_created ON ${s}.tasks (principal, created_at, id)`,
      `CREATE INDEX tasks_created ON ${s}.tasks (created_at, id)`,
      `CREATE INDEX tasks_account_active ON ${s}.tasks (account, status, expires_at)`,
      `CREATE INDEX tasks_owner ON ${s}.tasks (owner, status)`,
      `CREATE INDEX tasks_status ON ${s}.tasks (status, created_at)`,
      `CREATE INDEX tasks_expires ON ${s}.tasks (expires_at) WHERE expires_at IS NOT NULL`,
      `CREATE TABLE ${s}.task_inputs (
         seq bigserial NOT NULL,
         key text COLLATE "C" PRIMARY KEY,
         task_id text COLLATE "C" NOT NULL,
         principal text NOT NULL,
         method text NOT NULL,
         params text NOT NULL,
         state text NOT NULL,
         created_at bigint NOT NULL,
         answer text,
         upstream_request_id text
       )`,
      `CREATE INDEX task_inputs_task ON ${s}.task_inputs (task_id, created_at, seq)`,
      `CREATE TABLE ${s}.task_events (
         id bigserial PRIMARY KEY,
         task_id text COLLATE "C" NOT NULL,
         event text NOT NULL
       )`,
      `CREATE INDEX task_events_task ON ${s}.task_events (task_id, id)`,
      `CREATE TABLE ${s}.sessions (
         id text COLLATE "C" PRIMARY KEY,
         principal text NOT NULL,
         protocol_version text NOT NULL,
         client_capabilities text NOT NULL,
         client_info text NOT NULL,
         created_at bigint NOT NULL,
         last_seen_at bigint NOT NULL,
         account text COLLATE "C" NOT NULL,
         bytes bigint NOT NULL
       )`,
      `CREATE INDEX sessions_last_seen ON ${s}.sessions (last_seen_at)`,
      `CREATE INDEX sessions_account ON ${s}.sessions (account)`,
      // One row per account that ever stored something: the bytes it stores now (tasks and sessions), and the row
      // every creation of the account locks, so that its limits hold between processes.
      `CREATE TABLE ${s}.accounts (account text COLLATE "C" PRIMARY KEY, bytes bigint NOT NULL DEFAULT 0)`,
      `CREATE TABLE ${s}.leases (owner text COLLATE "C" PRIMARY KEY, until bigint NOT NULL)`,
      `CREATE TABLE ${s}.homes (client text COLLATE "C" PRIMARY KEY, home text NOT NULL, expires_at timestamptz NOT NULL)`,
      `CREATE INDEX homes_expires ON ${s}.homes (expires_at)`,
      // Token buckets: tokens at `at` (ms on the server's clock), when the bucket is full again (then forgotten), and
      // how many tokens its last take took. Unlogged: a take commits without waiting for the disk, and a bucket lost
      // in a crash is a full one.
      `CREATE UNLOGGED TABLE ${s}.rate_buckets (key text COLLATE "C" PRIMARY KEY, tokens float8 NOT NULL, at float8 NOT NULL,
         full_at float8 NOT NULL, taken float8 NOT NULL)`,
      `CREATE INDEX rate_buckets_full ON ${s}.rate_buckets (full_at)`,
    ],
    // The signals between processes (postgres-bus.ts) keep what they need in tables of their own.
    busTables(schema),
    activeCounter(s),
    revisionNames(s),
    // A principal's list carries each task's expiry: a page's scan checks it in the index (postgres-task-store.ts).
    [
      `CREATE INDEX IF NOT EXISTS tasks_principal_list ON ${s}.tasks (principal, created_at, id, expires_at)`,
      `DROP INDEX IF EXISTS ${s}.tasks_principal_created`,
    ],
    // What renews each principal's upstream token for work resumed without its caller (store/grant-vault.ts):
    // sealed text only, never a token in clear. Written to run again harmlessly, as the steps before it.
    [
      `CREATE TABLE IF NOT EXISTS ${s}.grants (principal text COLLATE "C" NOT NULL, upstream text COLLATE "C" NOT NULL, sealed text NOT NULL,
         expires_at bigint NOT NULL, PRIMARY KEY (principal, upstream))`,
      `CREATE INDEX IF NOT EXISTS grants_expires ON ${s}.grants (expires_at)`,
    ],
  ]
}

/**
 * Each task's era, and its resume address's, named by its revision (src/store/stored-revision.ts). The resume
 * address is flat JSON of strings, where the pair can only be the address's own field. A process of the previous
 * version still running (a rolling deploy) may write the previous names after this step: readers take both.
 */
function revisionNames (s: string): readonly string[] {
  return [
    `UPDATE ${s}.tasks SET era = CASE era WHEN 'legacy' THEN '2025-11-25' ELSE '2026-07-28' END WHERE era IN ('legacy', 'modern')`,
    `UPDATE ${s}.tasks SET resume = replace(replace(resume, '"era":"legacy"', '"era":"2025-11-25"'), '"era":"modern"', '"era":"2026-07-28"')
       WHERE resume LIKE '%"era":"legacy"%' OR resume LIKE '%"era":"modern"%'`,
  ]
}

/** The SQL types of TASK_COLUMNS, in their order. */
const COLUMN_TYPES = [
  'text', 'text', 'text', 'text', 'text', 'text', 'bigint', 'bigint', 'bigint', 'bigint', 'bigint', 'text', 'text', 'text', 'text',
  'text', 'text', 'text', 'text', 'text', 'text', 'bigint',
] as const

/**
 * Each account's count of unfinished tasks, kept with its bytes (a creation adds one, the move that ends a task or
 * the sweep that deletes a running one takes it off), so that a creation need not count the account's tasks; and
 * the creation itself as one function, one round trip: lock the account's row, check its limits, insert the task,
 * its accounting and its timeline. The count includes running tasks past their TTL not yet swept: only when it
 * reaches the limit are the live ones counted (under the same lock), so the limit stays exact. Arguments: the task's
 * columns (TASK_COLUMNS: $21 the account, $22 its bytes), then the limit of unfinished tasks, the budget of bytes
 * and the creation's timeline entry. Returns no row when the task is stored, else the count or the bytes that refused it.
 */
function activeCounter (s: string): readonly string[] {
  const n = TASK_COLUMNS.length
  const args = TASK_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')
  return [
    `ALTER TABLE ${s}.accounts ADD COLUMN active bigint NOT NULL DEFAULT 0`,
    `INSERT INTO ${s}.accounts AS a (account, active) SELECT account, count(*) FROM ${s}.tasks WHERE ${ACTIVE} GROUP BY account
       ON CONFLICT (account) DO UPDATE SET active = excluded.active`,
    `CREATE FUNCTION ${s}.create_task(${[...COLUMN_TYPES, 'bigint', 'bigint', 'text'].join(', ')})
       RETURNS TABLE (refused_active bigint, refused_bytes bigint) LANGUAGE plpgsql AS $fn$
     DECLARE
       held_bytes bigint;
       held_active bigint;
       running bigint;
     BEGIN
       -- The account's row, locked until the insert commits: racing creations of one account take turns here.
       INSERT INTO ${s}.accounts AS a (account) VALUES ($${n - 1}) ON CONFLICT (account) DO UPDATE SET bytes = a.bytes
         RETURNING a.bytes, a.active INTO held_bytes, held_active;
       IF $${n + 1} IS NOT NULL AND held_active >= $${n + 1} THEN
         SELECT count(*) INTO running FROM (SELECT 1 FROM ${s}.tasks WHERE account = $${n - 1} AND ${ACTIVE}
           AND (expires_at IS NULL OR expires_at > $7) LIMIT $${n + 1}) AS live;
         IF running >= $${n + 1} THEN
           RETURN QUERY SELECT running, NULL::bigint;
           RETURN;
         END IF;
       END IF;
       IF $${n + 2} IS NOT NULL AND $${n} > 0 AND held_bytes + $${n} > $${n + 2} THEN
         RETURN QUERY SELECT NULL::bigint, held_bytes;
         RETURN;
       END IF;
       INSERT INTO ${s}.tasks (${TASK_COLUMNS.join(', ')}) VALUES (${args});
       UPDATE ${s}.accounts SET bytes = bytes + $${n}, active = active + CASE WHEN $5 IN (${RUNNING}) THEN 1 ELSE 0 END
         WHERE account = $${n - 1};
       INSERT INTO ${s}.task_events (task_id, event) VALUES ($1, $${n + 3});
     END
     $fn$`,
  ]
}

/** How many steps this code knows. */
export const SCHEMA_VERSION = migrations('s', 's').length

/** The advisory lock of a schema's migrations: a 63-bit key from its name, the same in every process. */
function lockKey (schema: string): string {
  return BigInt.asIntN(64, BigInt('0x' + createHash('sha256').update(`mcp-task-gateway:${schema}`).digest('hex').slice(0, 16))).toString()
}

/**
 * Brings `schema` up to SCHEMA_VERSION, creating it first when missing. Runs in one transaction holding an
 * advisory lock on the schema's name: of processes starting at once, one migrates and the others then find the
 * work done. A schema a newer gateway migrated further is refused with GW_ERR_STORE_SCHEMA, and left untouched.
 */
export async function migrate (runner: PostgresRunner, schema: string): Promise<void> {
  const s = `"${schema}"`
  await runner.transaction(async (query) => {
    await query('SELECT pg_advisory_xact_lock($1::bigint)', [lockKey(schema)])
    // Created only when missing: a role that may not create schemas can still use one made for it.
    if ((await query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).length === 0) await query(`CREATE SCHEMA ${s}`)
    await query(`CREATE TABLE IF NOT EXISTS ${s}.schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
    const [row] = await query<{ version: number | null }>(`SELECT max(version) AS version FROM ${s}.schema_migrations`)
    const current = row?.version ?? 0
    if (current > SCHEMA_VERSION) throw new GatewayError('GW_ERR_STORE_SCHEMA', [current, SCHEMA_VERSION])
    const steps = migrations(s, schema)
    for (let version = current; version < SCHEMA_VERSION; version++) {
      for (const statement of steps[version]!) await query(statement)
      await query(`INSERT INTO ${s}.schema_migrations (version) VALUES ($1)`, [version + 1])
    }
  })
}
