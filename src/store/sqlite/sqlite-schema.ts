import type Database from 'better-sqlite3'
import { GatewayError } from '../../errors.ts'

/** Ordered migrations; `user_version` records how many have run. Never edit a released step. */
export const MIGRATIONS: readonly string[] = [
  `CREATE TABLE sessions (
     id TEXT PRIMARY KEY,
     principal TEXT NOT NULL,
     protocol_version TEXT NOT NULL,
     client_capabilities TEXT NOT NULL,
     client_info TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     last_seen_at INTEGER NOT NULL
   );
   CREATE INDEX sessions_last_seen ON sessions (last_seen_at);`,

  // Tasks and their input queues. JSON columns hold JSON text; expires_at = created_at + ttl_ms, NULL = never.
  `CREATE TABLE tasks (
     id TEXT PRIMARY KEY,
     principal TEXT NOT NULL,
     session_id TEXT,
     era TEXT NOT NULL,
     status TEXT NOT NULL,
     status_message TEXT,
     created_at INTEGER NOT NULL,
     last_updated_at INTEGER NOT NULL,
     ttl_ms INTEGER,
     expires_at INTEGER,
     poll_interval_ms INTEGER NOT NULL,
     upstream TEXT NOT NULL,
     tool TEXT NOT NULL,
     request TEXT NOT NULL,
     progress_token TEXT,
     client_capabilities TEXT NOT NULL,
     outcome TEXT
   );
   CREATE INDEX tasks_principal_created ON tasks (principal, created_at, id);
   CREATE INDEX tasks_status ON tasks (status);
   CREATE INDEX tasks_expires ON tasks (expires_at);
   CREATE TABLE task_inputs (
     key TEXT PRIMARY KEY,
     task_id TEXT NOT NULL,
     principal TEXT NOT NULL,
     method TEXT NOT NULL,
     params TEXT NOT NULL,
     state TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     answer TEXT
   );
   CREATE INDEX task_inputs_task ON task_inputs (task_id, state, created_at);`,
  // Counting a principal's running tasks reads only their index entries (tasks.maxActivePerPrincipal).
  `CREATE INDEX tasks_principal_active ON tasks (principal, status, expires_at);
   DROP INDEX tasks_status;`,
  // The gateway process running each task ('' for tasks stored before owners were recorded).
  "ALTER TABLE tasks ADD COLUMN owner TEXT NOT NULL DEFAULT '';",
  // Counting a principal's sessions reads only their index entries (limits.sessionsPerPrincipal).
  'CREATE INDEX sessions_principal ON sessions (principal);',
  // The operator's list of every principal's tasks, newest first (the admin API), reads them in index order.
  'CREATE INDEX tasks_created ON tasks (created_at, id);',
  // Each task's timeline (JSON entries in insertion order), written in the transaction of the change it records.
  `CREATE TABLE task_events (
     id INTEGER PRIMARY KEY,
     task_id TEXT NOT NULL,
     event TEXT NOT NULL
   );
   CREATE INDEX task_events_task ON task_events (task_id, id);`,
  // The trace context of the span that created each task (tracing on), NULL when it was not traced.
  'ALTER TABLE tasks ADD COLUMN trace_context TEXT;',
  // How another process reaches a running task's upstream work again (JSON, NULL when it cannot), and the
  // upstream's own id of each input request the upstream sent for its task (JSON, to keep its type).
  `ALTER TABLE tasks ADD COLUMN resume TEXT;
   ALTER TABLE task_inputs ADD COLUMN upstream_request_id TEXT;`,
  // Per-principal limits count under an account (the principal, or `anonymous@<address>` without auth): each
  // task's account and the bytes it stores (its request, client capabilities, outcome and inputs, as UTF-8
  // JSON), each session's account and bytes (its client capabilities and info), and each account's total of
  // those bytes (limits.storedBytesPerPrincipal).
  `ALTER TABLE tasks ADD COLUMN account TEXT NOT NULL DEFAULT '';
   ALTER TABLE tasks ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
   UPDATE tasks SET account = principal,
     bytes = length(CAST(request AS BLOB)) +
       length(CAST(client_capabilities AS BLOB)) + COALESCE(length(CAST(outcome AS BLOB)), 0) +
       (SELECT COALESCE(SUM(length(CAST(params AS BLOB)) + COALESCE(length(CAST(answer AS BLOB)), 0)), 0)
        FROM task_inputs WHERE task_inputs.task_id = tasks.id);
   CREATE INDEX tasks_account_active ON tasks (account, status, expires_at);
   DROP INDEX tasks_principal_active;
   ALTER TABLE sessions ADD COLUMN account TEXT;
   ALTER TABLE sessions ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
   UPDATE sessions SET account = principal,
     bytes = length(CAST(client_capabilities AS BLOB)) + length(CAST(client_info AS BLOB));
   CREATE INDEX sessions_account ON sessions (account);
   DROP INDEX sessions_principal;
   CREATE TABLE account_bytes (account TEXT PRIMARY KEY, bytes INTEGER NOT NULL) WITHOUT ROWID;
   INSERT INTO account_bytes SELECT account, SUM(bytes) FROM
     (SELECT account, bytes FROM tasks UNION ALL SELECT account, bytes FROM sessions) GROUP BY account;`,
  // Each task's era, and its resume address's, is named by its revision (src/store/stored-revision.ts). The resume
  // address is flat JSON of strings, where the pair can only be the address's own field. A version before this
  // step refuses the file after it, so no process writes the previous names here again.
  `UPDATE tasks SET era = CASE era WHEN 'legacy' THEN '2025-11-25' ELSE '2026-07-28' END WHERE era IN ('legacy', 'modern');
   UPDATE tasks SET resume = replace(replace(resume, '"era":"legacy"', '"era":"2025-11-25"'), '"era":"modern"', '"era":"2026-07-28"')
     WHERE resume LIKE '%"era":"legacy"%' OR resume LIKE '%"era":"modern"%';`,
  // A principal's list carries each task's expiry, so a page passes over tasks past their TTL that wait for the
  // sweep in the index, without reading their rows.
  `CREATE INDEX IF NOT EXISTS tasks_principal_list ON tasks (principal, created_at, id, expires_at);
   DROP INDEX IF EXISTS tasks_principal_created;`,
  // What renews each principal's upstream token for work resumed without its caller (store/grant-vault.ts):
  // sealed text only, never a token in clear. Written to run again harmlessly (a test replays the steps before it).
  `CREATE TABLE IF NOT EXISTS grants (
     principal TEXT NOT NULL,
     upstream TEXT NOT NULL,
     sealed TEXT NOT NULL,
     expires_at INTEGER NOT NULL,
     PRIMARY KEY (principal, upstream)
   ) WITHOUT ROWID;
   CREATE INDEX IF NOT EXISTS grants_expires ON grants (expires_at);`,
]

export const SCHEMA_VERSION = MIGRATIONS.length

export function migrate (db: Database.Database): void {
  const current = db.pragma('user_version', { simple: true }) as number
  if (current > SCHEMA_VERSION) throw new GatewayError('GW_ERR_STORE_SCHEMA', [current, SCHEMA_VERSION])
  for (let version = current; version < SCHEMA_VERSION; version++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[version]!)
      db.pragma(`user_version = ${version + 1}`)
    })()
  }
}
