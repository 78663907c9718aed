import { GatewayError } from '../../errors.ts'
import { jsonBytes, overBudget } from '../stored-bytes.ts'
import { inputEvent, settledEvent, TIMELINE_LIMIT } from '../task-timeline.ts'
import type { InputRecord, TaskEvent, TaskOutcome } from '../types.ts'
import type { PostgresRunner } from './postgres-connection.ts'
import { json, toInput, type InputRow } from './postgres-rows.ts'

const INPUT_FIELDS = 'key, task_id, principal, method, params, state, created_at, answer, upstream_request_id'

/**
 * The common table expressions that append a timeline entry (the text parameter `$event`) to the task `task` (an
 * expression over the rows of `from`, the CTE of the change it records: no row, no entry) and drop the task's
 * oldest entries beyond TIMELINE_LIMIT (`$keep` is TIMELINE_LIMIT - 1: the statement's snapshot does not hold the
 * new entry). Part of the change's own statement, so the timeline never disagrees with the task.
 */
export function appendEvent (s: string, task: string, event: number, keep: number, from: string): string {
  return `event AS (INSERT INTO ${s}.task_events (task_id, event) SELECT ${task}, $${event}::text FROM ${from}),
    trimmed AS (DELETE FROM ${s}.task_events WHERE task_id IN (SELECT ${task} FROM ${from}) AND id <= (
      SELECT e.id FROM ${s}.task_events AS e WHERE e.task_id IN (SELECT ${task} FROM ${from}) ORDER BY e.id DESC OFFSET $${keep} LIMIT 1))`
}

/** The input queues of tasks, in the `task_inputs` table, and their timelines; each change writes its entry with it. */
export class PostgresInputs {
  readonly #db: PostgresRunner
  readonly #s: string

  constructor (db: PostgresRunner, schema: string) {
    this.#db = db
    this.#s = `"${schema}"`
  }

  /** Under the task's row lock: the pending count, the budget and the insert hold together. */
  async add (input: InputRecord, maxPending: number, maxStoredBytes?: number): Promise<void> {
    const s = this.#s
    const added = jsonBytes(input.params)
    await this.#db.transaction(async (query) => {
      const [task] = await query<{ account: string }>(`SELECT account FROM ${s}.tasks WHERE id = $1 FOR UPDATE`, [input.taskId])
      if (task === undefined) throw new GatewayError('GW_ERR_TASK_NOT_FOUND', [input.taskId])
      const [{ count } = { count: 0 }] = await query<{ count: number }>(`SELECT count(*) AS count FROM ${s}.task_inputs
        WHERE task_id = $1 AND state = 'pending'`, [input.taskId])
      if (count >= maxPending) throw new GatewayError('GW_ERR_TASK_INPUT_LIMIT', [input.taskId, maxPending])
      if (maxStoredBytes !== undefined && added > 0) {
        const [held] = await query<{ bytes: number }>(`SELECT bytes FROM ${s}.accounts WHERE account = $1 FOR UPDATE`, [task.account])
        const refusal = overBudget(held?.bytes ?? 0, added, maxStoredBytes)
        if (refusal) throw refusal
      }
      await query(`WITH queued AS (INSERT INTO ${s}.task_inputs (${INPUT_FIELDS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING task_id),
          task AS (UPDATE ${s}.tasks SET bytes = bytes + $10 WHERE id = $2),
          counted AS (UPDATE ${s}.accounts SET bytes = bytes + $10 WHERE account = $11),
          ${appendEvent(s, 'task_id', 12, 13, 'queued')}
        SELECT 1`, [
        input.key, input.taskId, input.principal, input.method, JSON.stringify(input.params), input.state, input.createdAt,
        json(input.answer), input.upstreamRequestId === undefined ? null : JSON.stringify(input.upstreamRequestId),
        added, task.account, JSON.stringify(inputEvent(input)), TIMELINE_LIMIT - 1,
      ])
    })
  }

  async get (key: string): Promise<InputRecord | null> {
    const [row] = await this.#db.rows<InputRow>(`SELECT ${INPUT_FIELDS} FROM ${this.#s}.task_inputs WHERE key = $1`, [key], 'gw_input_get')
    return row ? toInput(row) : null
  }

  /** A task's inputs (only the pending ones with `pendingOnly`), oldest first, in arrival order within a millisecond. */
  async of (taskId: string, pendingOnly: boolean): Promise<InputRecord[]> {
    const rows = await this.#db.rows<InputRow>(`SELECT ${INPUT_FIELDS} FROM ${this.#s}.task_inputs WHERE task_id = $1
      ${pendingOnly ? "AND state = 'pending'" : ''} ORDER BY created_at, seq`, [taskId])
    return rows.map(toInput)
  }

  /** One statement: the compare-and-set from pending, the answer's bytes on the task's account, the timeline entry. */
  async settle (key: string, state: 'answered' | 'expired', answer: TaskOutcome | null, now: number): Promise<boolean> {
    const s = this.#s
    const text = json(answer)
    const [row] = await this.#db.rows<{ count: number }>(`WITH settled AS (UPDATE ${s}.task_inputs SET state = $2, answer = $3
          WHERE key = $1 AND state = 'pending' RETURNING task_id),
        task AS (UPDATE ${s}.tasks SET bytes = bytes + $4 WHERE id IN (SELECT task_id FROM settled) RETURNING id, account),
        counted AS (UPDATE ${s}.accounts SET bytes = bytes + $4 WHERE $4 <> 0 AND account IN (SELECT account FROM task)),
        ${appendEvent(s, 'id', 5, 6, 'task')}
      SELECT count(*) AS count FROM settled`, [
      key, state, text, text === null ? 0 : Buffer.byteLength(text), JSON.stringify(settledEvent(key, state, now)), TIMELINE_LIMIT - 1,
    ])
    return (row?.count ?? 0) === 1
  }

  async timeline (taskId: string): Promise<TaskEvent[]> {
    const rows = await this.#db.rows<{ event: string }>(`SELECT event FROM ${this.#s}.task_events WHERE task_id = $1 ORDER BY id`, [taskId])
    return rows.map((row) => JSON.parse(row.event) as TaskEvent)
  }
}
