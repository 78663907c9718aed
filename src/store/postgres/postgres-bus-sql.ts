import { createHash } from 'node:crypto'
import pg from 'pg'

/**
 * The statements of the PostgreSQL signal bus (postgres-bus.ts), over three tables of the store's schema:
 *
 * - `bus_processes`: each bus instance (a gateway process), the PostgreSQL channel it LISTENs on, and the
 *   backend pid and start time of its LISTEN connection. A row counts only while that backend is alive
 *   (pg_stat_activity has the same pid and start time: a pid alone may have been reused);
 * - `bus_listeners`: which process has handlers for which bus channel (deleted with its process);
 * - `bus_messages`: the text of a message too long for a notification (NOTIFY carries less than 8000 bytes),
 *   until each process it was sent to has read it (or 5 minutes passed: a receiver died).
 *
 * The tables are UNLOGGED: nothing on them has to outlive the connections that wrote it. A crash of the server
 * empties them and ends every LISTEN connection, and each bus registers all it listens to again on its new one.
 *
 * pg_stat_activity shows the start time of another session only to its own role (or to a member of
 * pg_read_all_stats): every process of a cluster connects as the same role, or its publishes count nobody else.
 */

/** A bus channel and a message travel as `[channel, message]` in JSON, in the notification or in bus_messages. */
export function encodeMessage (channel: string, messageJson: string): string {
  return `[${JSON.stringify(channel)},${messageJson}]`
}

/** NOTIFY refuses a payload of 8000 bytes or more (the default build of PostgreSQL). */
export const MAX_NOTIFY_BYTES = 7999

/**
 * The PostgreSQL channel a bus instance LISTENs on: one per process, whatever its bus channels are called (those
 * are long, many, and not identifiers). A hash of the schema and the process id: 36 characters, an identifier.
 */
export function listenChannel (schema: string, processId: string): string {
  return `bus_${createHash('sha256').update(`${schema}\0${processId}`).digest('hex').slice(0, 32)}`
}

/** The bus's own DDL (idempotent: CREATE … IF NOT EXISTS), run by the store as one step of its migrations. */
export function busTables (schema: string): string[] {
  const s = pg.escapeIdentifier(schema)
  return [
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.bus_processes (
      process text PRIMARY KEY,
      pg_channel text NOT NULL,
      pid integer NOT NULL,
      backend_start timestamptz NOT NULL
    )`,
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.bus_listeners (
      channel text NOT NULL,
      process text NOT NULL REFERENCES ${s}.bus_processes (process) ON DELETE CASCADE,
      PRIMARY KEY (channel, process)
    )`,
    `CREATE INDEX IF NOT EXISTS bus_listeners_process ON ${s}.bus_listeners (process)`,
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.bus_messages (
      id bigserial PRIMARY KEY,
      body text NOT NULL,
      remaining integer NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`,
  ]
}

/** A named (prepared once per connection) statement. */
export interface Statement {
  name: string
  text: string
}

/** The statements of one schema. */
export interface BusStatements {
  /** ($1 bus channel, $2 encoded message) → n: notifies every live process listening, counts them. */
  publish: Statement
  /** The same for a message too long for NOTIFY: stored once, each notification carries its id. */
  publishStored: Statement
  /** ($1 process, $2 PostgreSQL channel): the process listens on this connection (run on it). */
  register: string
  /** ($1 process): forgets what the process listened to (before registering all of it again). */
  forget: string
  /** ($1 process, $2 channels to drop, $3 channels to add). */
  change: Statement
  /** ($1 id) → body, remaining: reads a stored message, counting the read. */
  read: Statement
  /** ($1 id): deletes a stored message every receiver read. */
  drop: Statement
  /** ($1 process): deletes the process and what it listened to (cascade). */
  leave: string
  /** Deletes processes whose LISTEN connection is gone, and stored messages nobody read within 5 minutes. */
  sweep: string
}

export function busStatements (schema: string): BusStatements {
  const s = pg.escapeIdentifier(schema)
  // Statement names are per connection; two stores on two schemas may share a pool's connection.
  const tag = createHash('sha256').update(schema).digest('hex').slice(0, 12)
  // pg_stat_get_activity(pid), what the pg_stat_activity view reads, looks up that one backend: no list of every
  // backend to join with on each publish.
  const live = `FROM ${s}.bus_listeners l
      JOIN ${s}.bus_processes p ON p.process = l.process
      CROSS JOIN LATERAL pg_stat_get_activity(p.pid) a
      WHERE l.channel = $1 AND a.backend_start = p.backend_start`
  return {
    publish: {
      name: `bus-publish-${tag}`,
      text: `SELECT count(pg_notify(p.pg_channel, $2))::int AS n ${live}`,
    },
    publishStored: {
      name: `bus-publish-stored-${tag}`,
      // A CTE read twice is computed once: the message's `remaining` is the number of notifications sent.
      text: `WITH t AS (SELECT p.pg_channel ${live}),
        m AS (INSERT INTO ${s}.bus_messages (body, remaining) SELECT $2, count(*) FROM t HAVING count(*) > 0 RETURNING id)
        SELECT count(pg_notify(t.pg_channel, m.id::text))::int AS n FROM t CROSS JOIN m`,
    },
    register: `INSERT INTO ${s}.bus_processes (process, pg_channel, pid, backend_start)
      SELECT $1, $2, pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()
      ON CONFLICT (process) DO UPDATE SET pg_channel = EXCLUDED.pg_channel, pid = EXCLUDED.pid, backend_start = EXCLUDED.backend_start`,
    forget: `DELETE FROM ${s}.bus_listeners WHERE process = $1`,
    change: {
      name: `bus-change-${tag}`,
      // A join with the channels, not `= ANY($2)`: a generic plan of that may read every row of the process.
      text: `WITH dropped AS (DELETE FROM ${s}.bus_listeners l USING unnest($2::text[]) AS d (channel) WHERE l.process = $1 AND l.channel = d.channel)
        INSERT INTO ${s}.bus_listeners (channel, process) SELECT unnest($3::text[]), $1 ON CONFLICT DO NOTHING`,
    },
    read: {
      name: `bus-read-${tag}`,
      text: `UPDATE ${s}.bus_messages SET remaining = remaining - 1 WHERE id = $1 RETURNING body, remaining`,
    },
    drop: {
      name: `bus-drop-${tag}`,
      text: `DELETE FROM ${s}.bus_messages WHERE id = $1 AND remaining <= 0`,
    },
    leave: `DELETE FROM ${s}.bus_processes WHERE process = $1`,
    // A process's row is deleted only if it still names the backend found dead: one that registered again
    // meanwhile (a new pid and start time) is kept, whatever this statement's view of pg_stat_activity was.
    sweep: `WITH dead AS (
        SELECT p.process, p.pid, p.backend_start FROM ${s}.bus_processes p
        WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = p.pid AND a.backend_start = p.backend_start)
      ), gone AS (
        DELETE FROM ${s}.bus_processes p USING dead d
        WHERE p.process = d.process AND p.pid = d.pid AND p.backend_start = d.backend_start
      )
      DELETE FROM ${s}.bus_messages WHERE created_at < now() - interval '5 minutes'`,
  }
}
