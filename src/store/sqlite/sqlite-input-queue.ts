import type Database from 'better-sqlite3'
import { GatewayError } from '../../errors.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import { inputEvent, settledEvent } from '../task-timeline.ts'
import type { InputRecord, InputState, TaskOutcome } from '../types.ts'
import { backend, json } from './sqlite-rows.ts'
import type { SqliteTimeline } from './sqlite-timeline.ts'
import type { SqliteAccountBytes } from './sqlite-account-bytes.ts'
import { jsonBytes } from '../stored-bytes.ts'

interface InputRow {
  key: string
  task_id: string
  principal: string
  method: string
  params: string
  state: InputState
  created_at: number
  answer: string | null
  /** JSON: the upstream's request id keeps its type (a number or a string). */
  upstream_request_id: string | null
}

function toInput (row: InputRow): InputRecord {
  const input: InputRecord = {
    key: row.key,
    taskId: row.task_id,
    principal: row.principal,
    method: row.method,
    params: JSON.parse(row.params) as JsonObject,
    state: row.state,
    createdAt: row.created_at,
    answer: row.answer === null ? null : JSON.parse(row.answer) as TaskOutcome,
  }
  if (row.upstream_request_id !== null) input.upstreamRequestId = JSON.parse(row.upstream_request_id) as string | number
  return input
}

/** The input queues of tasks, in the `task_inputs` table; each change writes its timeline entry in its transaction. */
export class SqliteInputQueue {
  readonly #selectInput: Database.Statement<[string], InputRow>
  readonly #pending: Database.Statement<[string], InputRow>
  readonly #inputsOf: Database.Statement<[string], InputRow>
  readonly #settle: Database.Transaction<(key: string, state: 'answered' | 'expired', answer: string | null, now: number) => boolean>
  readonly #addInput: Database.Transaction<(input: InputRecord, maxPending: number, maxStoredBytes: number | undefined) => void>

  /** `bytes`: the stored bytes of the tasks' accounts, which inputs and answers add to. */
  constructor (db: Database.Database, timeline: SqliteTimeline, bytes: SqliteAccountBytes) {
    const accountOf = db.prepare<[string], { account: string }>('SELECT account FROM tasks WHERE id = ?')
    const insertInput = db.prepare<[InputRow]>(`INSERT INTO task_inputs (key, task_id, principal, method, params, state, created_at, answer, upstream_request_id)
      VALUES (@key, @task_id, @principal, @method, @params, @state, @created_at, @answer, @upstream_request_id)`)
    this.#selectInput = db.prepare('SELECT * FROM task_inputs WHERE key = ?')
    this.#pending = db.prepare("SELECT * FROM task_inputs WHERE task_id = ? AND state = 'pending' ORDER BY created_at, rowid")
    this.#inputsOf = db.prepare('SELECT * FROM task_inputs WHERE task_id = ? ORDER BY created_at, rowid')
    const countPending = db.prepare<[string], { count: number }>("SELECT COUNT(*) AS count FROM task_inputs WHERE task_id = ? AND state = 'pending'")
    const settle = db.prepare<[{ key: string, state: InputState, answer: string | null }]>("UPDATE task_inputs SET state = @state, answer = @answer WHERE key = @key AND state = 'pending'")
    this.#settle = db.transaction((key: string, state: 'answered' | 'expired', answer: string | null, now: number) => {
      if (settle.run({ key, state, answer }).changes !== 1) return false
      const input = this.#selectInput.get(key)
      if (input) timeline.append(input.task_id, settledEvent(key, state, now))
      if (input && answer !== null) bytes.add(input.task_id, Buffer.byteLength(answer))
      return true
    })
    this.#addInput = db.transaction((input: InputRecord, maxPending: number, maxStoredBytes: number | undefined) => {
      const task = accountOf.get(input.taskId)
      if (task === undefined) throw new GatewayError('GW_ERR_TASK_NOT_FOUND', [input.taskId])
      if (countPending.get(input.taskId)!.count >= maxPending) {
        throw new GatewayError('GW_ERR_TASK_INPUT_LIMIT', [input.taskId, maxPending])
      }
      const added = jsonBytes(input.params)
      bytes.check(task.account, added, maxStoredBytes)
      insertInput.run({
        key: input.key,
        task_id: input.taskId,
        principal: input.principal,
        method: input.method,
        params: JSON.stringify(input.params),
        state: input.state,
        created_at: input.createdAt,
        answer: json(input.answer),
        upstream_request_id: input.upstreamRequestId === undefined ? null : JSON.stringify(input.upstreamRequestId),
      })
      bytes.add(input.taskId, added)
      timeline.append(input.taskId, inputEvent(input))
    })
  }

  add (input: InputRecord, maxPending: number, maxStoredBytes?: number): void {
    // IMMEDIATE: the limit checks and the insert hold the write lock together.
    backend(() => this.#addInput.immediate(input, maxPending, maxStoredBytes))
  }

  get (key: string): InputRecord | null {
    return backend(() => {
      const row = this.#selectInput.get(key)
      return row ? toInput(row) : null
    })
  }

  pendingOf (taskId: string): InputRecord[] {
    return backend(() => this.#pending.all(taskId).map(toInput))
  }

  allOf (taskId: string): InputRecord[] {
    return backend(() => this.#inputsOf.all(taskId).map(toInput))
  }

  settle (key: string, state: 'answered' | 'expired', answer: TaskOutcome | null, now: number): boolean {
    return backend(() => this.#settle(key, state, json(answer), now))
  }
}
