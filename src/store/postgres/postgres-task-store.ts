import { GatewayError } from '../../errors.ts'
import { canTransition, isTerminal, type TaskStatus } from '../../wire/task-state.ts'
import { overBudget } from '../stored-bytes.ts'
import { claimedEvent, createdEvent, statusEvent, TIMELINE_LIMIT } from '../task-timeline.ts'
import type { InputRecord, TaskCreateOptions, TaskCursor, TaskEvent, TaskOutcome, TaskPatch, TaskQuery, TaskRecord, TaskStore } from '../types.ts'
import type { PostgresRunner } from './postgres-connection.ts'
import { PostgresInputs, appendEvent } from './postgres-inputs.ts'
import { ReadBatch } from './postgres-read-batch.ts'
import { ACTIVE, live, TASK_FIELDS, TASK_TEXT, taskValues, textToTask, toTask, type TaskRow } from './postgres-rows.ts'

/** Tasks deleted per statement of a sweep, so that no statement holds many locks or runs long. */
const SWEEP_BATCH = 500

/** What a move reads of its task first, holding the task's row lock until the move commits. */
interface Current {
  status: TaskStatus
  owner: string
  expires_at: number | null
  account: string
  request_bytes: number
  outcome_bytes: number
}

/** The filters of a TaskQuery and the column each one matches. */
const FILTERS = [['status', 'status'], ['upstream', 'upstream'], ['tool', 'tool'], ['principal', 'principal']] as const

/**
 * Tasks in the `tasks` table of the store's schema. A status move is a compare-and-set on the task's row (read
 * under its lock, then `UPDATE … WHERE id = $1`), in one transaction with its timeline entry and the stored bytes
 * it frees or adds, and the account's count of unfinished tasks when it ends one; a creation locks its account's
 * row, so that the limits hold between processes. `tasks/get` is one prepared SELECT, shared by the reads of one
 * turn of the event loop (ReadBatch).
 */
/**
 * A page of a principal's tasks (schema `s`; $1 principal, $2 now, then the cursor's $3 createdAt and $4 id when
 * `after`, then the page size): two ordered index scans of `tasks_principal_list` from the cursor on, merged, one for
 * the tasks without a TTL and one for those whose TTL runs past now. Each scan checks the expiry in the index, so a
 * task past its TTL (waiting for the sweep) is passed over there, its row unread; an OR of the two would be a filter
 * on every row the scan fetched.
 */
export function listStatement (s: string, after: boolean): string {
  const from = after ? 'AND (created_at, id) > ($3, $4)' : ''
  const limit = after ? '$5' : '$3'
  const branch = (expiry: string): string =>
    `(SELECT ${TASK_FIELDS} FROM ${s}.tasks WHERE principal = $1 AND ${expiry} ${from} ORDER BY created_at, id LIMIT ${limit})`
  return `SELECT * FROM (${branch('expires_at IS NULL')} UNION ALL ${branch('expires_at > $2')}) AS page ORDER BY created_at, id LIMIT ${limit}`
}

export class PostgresTaskStore implements TaskStore {
  readonly #db: PostgresRunner
  readonly #s: string
  readonly #inputs: PostgresInputs
  readonly #byId: ReadBatch

  constructor (db: PostgresRunner, schema: string) {
    this.#db = db
    this.#s = `"${schema}"`
    this.#inputs = new PostgresInputs(db, schema)
    this.#byId = new ReadBatch(async (ids, now) => await db.rows<{ id: string, t: string }>(
      `SELECT id, ${TASK_TEXT} FROM ${this.#s}.tasks WHERE id = ANY($1::text[]) AND ${live(2)}`, [ids, now], 'gw_task_get'))
  }

  /** One round trip: the schema's create_task function (postgres-schema.ts) locks the account, checks and inserts. */
  async create (task: TaskRecord, options: TaskCreateOptions = {}): Promise<void> {
    const account = options.account ?? task.principal
    const { values, bytes } = taskValues(task, account)
    const n = values.length + 3
    // A write, so a WITH: a SELECT met by a lost connection runs again (PostgresRunner.rows), and this one must not.
    const [refused] = await this.#db.rows<{ refused_active: number | null, refused_bytes: number | null }>(`WITH refused AS (
        SELECT * FROM ${this.#s}.create_task(${Array.from({ length: n }, (_, i) => `$${i + 1}`).join(', ')})) SELECT * FROM refused`,
    [...values, options.maxActive ?? null, options.maxStoredBytes ?? null, JSON.stringify(createdEvent(task))], 'gw_task_create')
    if (refused === undefined) return
    if (refused.refused_active !== null) throw new GatewayError('GW_ERR_TASK_LIMIT', [refused.refused_active, options.maxActive])
    throw new GatewayError('GW_ERR_STORED_BYTES_LIMIT', [refused.refused_bytes, bytes, options.maxStoredBytes])
  }

  /**
   * One round trip, shared with the other reads of the same turn: a statement prepared once per connection, a row
   * one text value (TASK_TEXT), judged against this caller's `now` (the statement had the earliest of the batch).
   */
  async get (id: string, now: number): Promise<TaskRecord | null> {
    const text = await this.#byId.read(id, now)
    return text === undefined ? null : textToTask(text, now)
  }

  async list (principal: string, after: TaskCursor | undefined, limit: number, now: number): Promise<TaskRecord[]> {
    const bounded = Math.max(0, limit)
    const rows = after
      ? await this.#db.rows<TaskRow>(listStatement(this.#s, true), [principal, now, after.createdAt, after.id, bounded], 'gw_task_list_after')
      : await this.#db.rows<TaskRow>(listStatement(this.#s, false), [principal, now, bounded], 'gw_task_list')
    return rows.map(toTask)
  }

  async query (query: TaskQuery, before: TaskCursor | undefined, limit: number, now: number): Promise<TaskRecord[]> {
    const values: unknown[] = [now]
    const where = [live(1)]
    for (const [field, column] of FILTERS) {
      if (query[field] === undefined) continue
      values.push(query[field])
      where.push(`${column} = $${values.length}`)
    }
    if (before) {
      values.push(before.createdAt, before.id)
      where.push(`(created_at, id) < ($${values.length - 1}, $${values.length})`)
    }
    values.push(Math.max(0, limit))
    const rows = await this.#db.rows<TaskRow>(`SELECT ${TASK_FIELDS} FROM ${this.#s}.tasks WHERE ${where.join(' AND ')}
      ORDER BY created_at DESC, id DESC LIMIT $${values.length}`, values)
    return rows.map(toTask)
  }

  async transition (id: string, from: readonly TaskStatus[], to: TaskStatus, patch: TaskPatch, now: number): Promise<TaskRecord | null> {
    // Only a move of the table: a terminal task never changes, whatever `from` says.
    const sources = from.filter((status) => canTransition(status, to))
    if (sources.length === 0) return null
    const s = this.#s
    const outcome = patch.outcome === undefined ? null : JSON.stringify(patch.outcome)
    const ended = isTerminal(to)
    // Without a budget to check before it, the move is one statement (the row's lock taken and the move made in it).
    if (patch.maxStoredBytes === undefined || outcome === null) return await this.#move(id, sources, to, patch, now, outcome)
    return await this.#db.transaction(async (query) => {
      const [current] = await query<Current>(`SELECT status, owner, expires_at, account, octet_length(request) AS request_bytes,
        COALESCE(octet_length(outcome), 0) AS outcome_bytes FROM ${s}.tasks WHERE id = $1 FOR UPDATE`, [id])
      if (current === undefined || !sources.includes(current.status)) return null
      if (current.expires_at !== null && current.expires_at <= now) return null
      if (patch.asOwner !== undefined && current.owner !== patch.asOwner) return null
      // What the move frees (the request of a task that ends: only a running task needs its arguments) and adds.
      const change = (ended ? -current.request_bytes : 0) + (outcome === null ? 0 : Buffer.byteLength(outcome) - current.outcome_bytes)
      if (patch.maxStoredBytes !== undefined && change > 0) {
        const [held] = await query<{ bytes: number }>(`SELECT bytes FROM ${s}.accounts WHERE account = $1 FOR UPDATE`, [current.account])
        const refusal = overBudget(held?.bytes ?? 0, change, patch.maxStoredBytes)
        if (refusal) throw refusal
      }
      const [row] = await query<TaskRow>(`WITH moved AS (UPDATE ${s}.tasks SET status = $2,
            status_message = CASE WHEN $3 THEN $4 ELSE status_message END,
            outcome = COALESCE($5, outcome),
            request = CASE WHEN $6 THEN '{}' ELSE request END,
            resume = CASE WHEN $6 THEN NULL WHEN $7 THEN $8 ELSE resume END,
            last_updated_at = $9, bytes = bytes + $10
          WHERE id = $1 RETURNING ${TASK_FIELDS}),
          counted AS (UPDATE ${s}.accounts SET bytes = bytes + $10, active = active - CASE WHEN $6 THEN 1 ELSE 0 END
            WHERE ($10 <> 0 OR $6) AND account = $11),
          ${appendEvent(s, '$1::text', 12, 13, 'moved')}
        SELECT * FROM moved`, [
        id, to, patch.statusMessage !== undefined, patch.statusMessage ?? null, outcome, ended, patch.resume !== undefined,
        patch.resume == null ? null : JSON.stringify(patch.resume), now, change, current.account,
        JSON.stringify(statusEvent(to, patch, now, outcome ?? undefined)), TIMELINE_LIMIT - 1,
      ])
      return row ? toTask(row) : null
    })
  }

  /** A move in one statement: the compare-and-set on the locked row, the bytes it frees or adds, its timeline entry. */
  async #move (
    id: string, sources: readonly TaskStatus[], to: TaskStatus, patch: TaskPatch, now: number, outcome: string | null,
  ): Promise<TaskRecord | null> {
    const s = this.#s
    const [row] = await this.#db.rows<TaskRow>(`WITH current AS (SELECT id, account, octet_length(request) AS request_bytes,
          COALESCE(octet_length(outcome), 0) AS outcome_bytes FROM ${s}.tasks
          WHERE id = $1 AND status = ANY($10::text[]) AND ${live(9)} AND ($11::text IS NULL OR owner = $11) FOR UPDATE),
        changed AS (SELECT id, account, (CASE WHEN $6 THEN -request_bytes ELSE 0 END) +
          (CASE WHEN $5::text IS NULL THEN 0 ELSE $12 - outcome_bytes END) AS change FROM current),
        moved AS (UPDATE ${s}.tasks AS t SET status = $2,
            status_message = CASE WHEN $3 THEN $4 ELSE t.status_message END,
            outcome = COALESCE($5, t.outcome),
            request = CASE WHEN $6 THEN '{}' ELSE t.request END,
            resume = CASE WHEN $6 THEN NULL WHEN $7 THEN $8 ELSE t.resume END,
            last_updated_at = $9, bytes = t.bytes + changed.change
          FROM changed WHERE t.id = changed.id RETURNING ${TASK_FIELDS.split(', ').map((field) => `t.${field}`).join(', ')}),
        counted AS (UPDATE ${s}.accounts AS a SET bytes = a.bytes + changed.change, active = a.active - CASE WHEN $6 THEN 1 ELSE 0 END
          FROM changed WHERE a.account = changed.account AND (changed.change <> 0 OR $6)),
        ${appendEvent(s, '$1::text', 13, 14, 'moved')}
      SELECT * FROM moved`, [
      id, to, patch.statusMessage !== undefined, patch.statusMessage ?? null, outcome, isTerminal(to), patch.resume !== undefined,
      patch.resume == null ? null : JSON.stringify(patch.resume), now, sources, patch.asOwner ?? null,
      outcome === null ? 0 : Buffer.byteLength(outcome), JSON.stringify(statusEvent(to, patch, now, outcome ?? undefined)),
      TIMELINE_LIMIT - 1,
    ], 'gw_task_move')
    return row ? toTask(row) : null
  }

  async countActive (account: string, now: number, atMost = Number.MAX_SAFE_INTEGER): Promise<number> {
    const [row] = await this.#db.rows<{ count: number }>(`SELECT count(*) AS count FROM (SELECT 1 FROM ${this.#s}.tasks
      WHERE account = $1 AND ${ACTIVE} AND ${live(2)} LIMIT $3) AS running`, [account, now, atMost])
    return row?.count ?? 0
  }

  async storedBytes (account: string): Promise<number> {
    const [row] = await this.#db.rows<{ bytes: number }>(`SELECT bytes FROM ${this.#s}.accounts WHERE account = $1`, [account])
    return Math.max(0, row?.bytes ?? 0)
  }

  async unfinished (): Promise<TaskRecord[]> {
    return (await this.#db.rows<TaskRow>(`SELECT ${TASK_FIELDS} FROM ${this.#s}.tasks WHERE ${ACTIVE} ORDER BY created_at, id`)).map(toTask)
  }

  async ownedBy (owner: string, now: number): Promise<TaskRecord[]> {
    return (await this.#db.rows<TaskRow>(`SELECT ${TASK_FIELDS} FROM ${this.#s}.tasks WHERE owner = $1 AND ${ACTIVE} AND ${live(2)}
      ORDER BY created_at, id`, [owner, now])).map(toTask)
  }

  async ownerOf (id: string, now: number): Promise<string | null> {
    const [row] = await this.#db.rows<{ owner: string }>(`SELECT owner FROM ${this.#s}.tasks WHERE id = $1 AND ${ACTIVE} AND ${live(2)}`, [id, now], 'gw_task_owner')
    return row?.owner ?? null
  }

  /** One statement: the compare-and-set of the owner and its timeline entry. */
  async claim (id: string, from: string, to: string, now: number): Promise<TaskRecord | null> {
    const s = this.#s
    const [row] = await this.#db.rows<TaskRow>(`WITH moved AS (UPDATE ${s}.tasks SET owner = $3
          WHERE id = $1 AND owner = $2 AND ${ACTIVE} AND ${live(4)} RETURNING ${TASK_FIELDS}),
        ${appendEvent(s, '$1::text', 5, 6, 'moved')}
      SELECT * FROM moved`, [id, from, to, now, JSON.stringify(claimedEvent(from, to, now)), TIMELINE_LIMIT - 1])
    return row ? toTask(row) : null
  }

  /**
   * Deletes the tasks past their TTL with their inputs and timelines, and takes their bytes off their accounts, a
   * batch per statement (each atomic: an input queued meanwhile waits for the task's row lock, then finds it gone);
   * a task another transaction holds is left for the next sweep. Then forgets full rate buckets and lapsed homes.
   */
  async sweep (now: number): Promise<number> {
    const s = this.#s
    let swept = 0
    for (;;) {
      const [row] = await this.#db.rows<{ count: number }>(`WITH gone AS (DELETE FROM ${s}.tasks WHERE id IN (
            SELECT id FROM ${s}.tasks WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING id, account, bytes, ${ACTIVE} AS running),
          inputs AS (DELETE FROM ${s}.task_inputs WHERE task_id IN (SELECT id FROM gone)),
          events AS (DELETE FROM ${s}.task_events WHERE task_id IN (SELECT id FROM gone)),
          counted AS (UPDATE ${s}.accounts AS a SET bytes = a.bytes - freed.bytes, active = a.active - freed.running
            FROM (SELECT account, sum(bytes) AS bytes, count(*) FILTER (WHERE running) AS running FROM gone GROUP BY account) AS freed
            WHERE a.account = freed.account)
        SELECT count(*) AS count FROM gone`, [now, SWEEP_BATCH])
      const batch = row?.count ?? 0
      swept += batch
      if (batch < SWEEP_BATCH) break
    }
    await this.#db.rows(`DELETE FROM ${s}.rate_buckets WHERE full_at <= extract(epoch FROM clock_timestamp())::float8 * 1000`)
    await this.#db.rows(`DELETE FROM ${s}.homes WHERE expires_at <= clock_timestamp()`)
    return swept
  }

  async addInput (input: InputRecord, maxPending: number, maxStoredBytes?: number): Promise<void> {
    await this.#inputs.add(input, maxPending, maxStoredBytes)
  }

  async getInput (key: string): Promise<InputRecord | null> {
    return await this.#inputs.get(key)
  }

  async pendingInputs (taskId: string): Promise<InputRecord[]> {
    return await this.#inputs.of(taskId, true)
  }

  async inputsOf (taskId: string): Promise<InputRecord[]> {
    return await this.#inputs.of(taskId, false)
  }

  async settleInput (key: string, state: 'answered' | 'expired', answer: TaskOutcome | null, now = Date.now()): Promise<boolean> {
    return await this.#inputs.settle(key, state, answer, now)
  }

  async timeline (taskId: string): Promise<TaskEvent[]> {
    return await this.#inputs.timeline(taskId)
  }
}
