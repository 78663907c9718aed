import type Database from 'better-sqlite3'
import { GatewayError } from '../../errors.ts'
import { canTransition, isTerminal, RUNNING_STATUSES, type TaskStatus } from '../../wire/task-state.ts'
import { claimedEvent, createdEvent, statusEvent } from '../task-timeline.ts'
import { WriteBatch } from './write-batch.ts'
import { RecentRecords } from '../recent-records.ts'
import type { InputRecord, TaskCreateOptions, TaskCursor, TaskEvent, TaskOutcome, TaskPatch, TaskQuery, TaskRecord, TaskStore } from '../types.ts'
import { SqliteInputQueue } from './sqlite-input-queue.ts'
import { backend, backendError, rowBytes, toRow, toTask, type TaskRow } from './sqlite-rows.ts'
import { SqliteTimeline } from './sqlite-timeline.ts'
import { SqliteTaskQuery } from './sqlite-task-query.ts'
import { SqliteAccountBytes } from './sqlite-account-bytes.ts'

interface TransitionParams {
  event: TaskEvent
  /** The outcome's bytes, when the move stores one; the account's budget (TaskPatch.maxStoredBytes). */
  outcomeBytes: number | undefined
  maxStoredBytes: number | undefined
  id: string
  from: string
  to: TaskStatus
  keepMessage: 0 | 1
  ended: 0 | 1
  statusMessage: string | null
  outcome: string | null
  /** 1: set `resume` to @resume (JSON, or NULL to clear it). */
  setResume: 0 | 1
  resume: string | null
  /** The owner the task must have (TaskPatch.asOwner); null for any. */
  asOwner: string | null
  now: number
}

const LIVE = '(expires_at IS NULL OR expires_at > @now)'

/**
 * A page of a principal's tasks, read in the order of `tasks_principal_list` from the cursor on: the index holds
 * each task's expiry, so a task past its TTL (waiting for the sweep) is passed over in the index, its row unread.
 */
export const LIST_FIRST = `SELECT * FROM tasks WHERE principal = @principal AND ${LIVE} ORDER BY created_at, id LIMIT @limit`
export const LIST_AFTER = `SELECT * FROM tasks WHERE principal = @principal AND ${LIVE}
  AND (created_at > @createdAt OR (created_at = @createdAt AND id > @id)) ORDER BY created_at, id LIMIT @limit`

/** What a new task's row stores, measured as stored-bytes.ts's taskBytes measures it, from the JSON already written. */
function rowTaskBytes (row: TaskRow): number {
  const outcome = row.outcome === null ? 0 : Buffer.byteLength(row.outcome)
  return Buffer.byteLength(row.request) + Buffer.byteLength(row.client_capabilities) + outcome
}

/** What LIVE says of a record already read. */
function live (task: TaskRecord, now: number): boolean {
  return task.ttlMs === null || task.createdAt + task.ttlMs > now
}

/** How many recently used task records the store keeps in memory (about as many as the tasks clients poll at once). */
const RECENT_TASKS = 4096
/** The text of the kept records at most (a request or a result can be megabytes). */
const RECENT_TASK_BYTES = 32 * 1024 * 1024

/** A set of statuses as SQL text, written once from task-state.ts (constants, so the planner uses tasks_principal_active). */
function sqlList (statuses: readonly string[]): string {
  return statuses.map((status) => `'${status.replaceAll("'", "''")}'`).join(', ')
}

const ACTIVE = `status IN (${sqlList(RUNNING_STATUSES)})`

/** Tasks and input queues in the `tasks` and `task_inputs` tables; every status move is an `UPDATE … WHERE status IN`. */
export class SqliteTaskStore implements TaskStore {
  readonly #insert: Database.Statement<[TaskRow]>
  readonly #select: Database.Statement<[{ id: string, now: number }], TaskRow>
  readonly #selectAny: Database.Statement<[string], TaskRow>
  readonly #listFirst: Database.Statement<[{ principal: string, limit: number, now: number }], TaskRow>
  readonly #listAfter: Database.Statement<[{ principal: string, createdAt: number, id: string, limit: number, now: number }], TaskRow>
  readonly #update: Database.Statement<[Omit<TransitionParams, 'event' | 'outcomeBytes' | 'maxStoredBytes'>]>
  readonly #sizes: Database.Statement<[string], { account: string, request_bytes: number, outcome_bytes: number }>
  readonly #bytes: SqliteAccountBytes
  readonly #countActive: Database.Statement<[{ account: string, now: number, limit: number }], { count: number }>
  readonly #unfinished: Database.Statement<[], TaskRow>
  readonly #ownedBy: Database.Statement<[{ owner: string, now: number }], TaskRow>
  readonly #claim: Database.Statement<[{ id: string, from: string, to: string, now: number }]>
  readonly #ownerOf: Database.Statement<[{ id: string, now: number }], { owner: string }>
  readonly #transition: Database.Transaction<(params: TransitionParams) => TaskRow | undefined>
  readonly #claimTx: Database.Transaction<(params: { id: string, from: string, to: string, now: number }) => TaskRow | undefined>
  readonly #timeline: SqliteTimeline
  readonly #inputs: SqliteInputQueue
  readonly #sweep: (now: number) => number
  /** Creations of one turn of the event loop, committed together (see WriteBatch). */
  readonly #creates: WriteBatch<{ row: TaskRow, maxActive: number | undefined, maxStoredBytes: number | undefined }>
  readonly #query: SqliteTaskQuery<TaskRow>
  /** Tasks read or moved lately: a `tasks/get` of one of them needs no query (this process is the file's only writer). */
  readonly #recent = new RecentRecords<TaskRecord>(RECENT_TASKS, RECENT_TASK_BYTES)
  /**
   * Per account, a number never below its running tasks that have not expired: exact after each count, one up
   * for each running task created, one down for each that ends (only a task that has not expired can end).
   * A creation counts in the file only when the bound reaches the limit, instead of reading the principal's
   * whole index each time (this process is the file's only writer, so nothing else adds tasks).
   */
  readonly #activeBound = new Map<string, number>()

  constructor (db: Database.Database) {
    this.#insert = db.prepare(`INSERT INTO tasks (id, principal, session_id, era, status, status_message, created_at, last_updated_at,
        ttl_ms, expires_at, poll_interval_ms, upstream, tool, request, progress_token, client_capabilities, outcome, owner, trace_context, resume, account, bytes)
      VALUES (@id, @principal, @session_id, @era, @status, @status_message, @created_at, @last_updated_at,
        @ttl_ms, @expires_at, @poll_interval_ms, @upstream, @tool, @request, @progress_token, @client_capabilities, @outcome, @owner, @trace_context, @resume,
        @account, @bytes)`)
    this.#select = db.prepare(`SELECT * FROM tasks WHERE id = @id AND ${LIVE}`)
    this.#selectAny = db.prepare('SELECT * FROM tasks WHERE id = ?')
    this.#listFirst = db.prepare(LIST_FIRST)
    this.#listAfter = db.prepare(LIST_AFTER)
    this.#query = new SqliteTaskQuery<TaskRow>(db, LIVE)
    this.#update = db.prepare(`UPDATE tasks SET status = @to,
        status_message = CASE WHEN @keepMessage THEN status_message ELSE @statusMessage END,
        outcome = COALESCE(@outcome, outcome),
        request = CASE WHEN @ended THEN '{}' ELSE request END,
        resume = CASE WHEN @ended THEN NULL WHEN @setResume THEN @resume ELSE resume END,
        last_updated_at = @now
      WHERE id = @id AND status IN (SELECT value FROM json_each(@from)) AND ${LIVE} AND (@asOwner IS NULL OR owner = @asOwner)`)
    this.#countActive = db.prepare(`SELECT COUNT(*) AS count FROM (SELECT 1 FROM tasks INDEXED BY tasks_account_active
      WHERE account = @account AND ${ACTIVE} AND ${LIVE} LIMIT @limit)`)
    this.#sizes = db.prepare(`SELECT account, length(CAST(request AS BLOB)) AS request_bytes,
      COALESCE(length(CAST(outcome AS BLOB)), 0) AS outcome_bytes FROM tasks WHERE id = ?`)
    const bytes = this.#bytes = new SqliteAccountBytes(db)
    this.#unfinished = db.prepare(`SELECT * FROM tasks WHERE ${ACTIVE} ORDER BY created_at, id`)
    this.#ownedBy = db.prepare(`SELECT * FROM tasks WHERE owner = @owner AND ${ACTIVE} AND ${LIVE} ORDER BY created_at, id`)
    this.#ownerOf = db.prepare(`SELECT owner FROM tasks WHERE id = @id AND ${ACTIVE} AND ${LIVE}`)
    this.#claim = db.prepare(`UPDATE tasks SET owner = @to WHERE id = @id AND owner = @from AND ${ACTIVE} AND ${LIVE}`)
    const timeline = this.#timeline = new SqliteTimeline(db)
    this.#inputs = new SqliteInputQueue(db, timeline, bytes)

    const sweepInputs = db.prepare<[number]>('DELETE FROM task_inputs WHERE task_id IN (SELECT id FROM tasks WHERE expires_at <= ?)')
    const sweepTasks = db.prepare<[number]>('DELETE FROM tasks WHERE expires_at <= ?')

    this.#transition = db.transaction(({ event, outcomeBytes, maxStoredBytes, ...params }: TransitionParams) => {
      // What the move frees (the request of a task that ends) and adds (its outcome), checked against the budget.
      let change = 0
      if (params.ended === 1 || outcomeBytes !== undefined) {
        const sizes = this.#sizes.get(params.id)
        if (sizes === undefined) return undefined
        change = (params.ended === 1 ? -sizes.request_bytes : 0) + (outcomeBytes === undefined ? 0 : outcomeBytes - sizes.outcome_bytes)
        bytes.check(sizes.account, change, maxStoredBytes)
      }
      if (this.#update.run(params).changes !== 1) return undefined
      bytes.add(params.id, change)
      timeline.append(params.id, event)
      return this.#selectAny.get(params.id)
    })
    this.#claimTx = db.transaction((params: { id: string, from: string, to: string, now: number }) => {
      if (this.#claim.run(params).changes !== 1) return undefined
      timeline.append(params.id, claimedEvent(params.from, params.to, params.now))
      return this.#selectAny.get(params.id)
    })
    this.#creates = new WriteBatch(db, ({ row, maxActive, maxStoredBytes }) => {
      const bound = this.#activeBound.get(row.account)
      if (maxActive !== undefined && (bound === undefined || bound >= maxActive)) {
        const active = this.#countActive.get({ account: row.account, now: row.created_at, limit: maxActive })!.count
        if (active >= maxActive) throw new GatewayError('GW_ERR_TASK_LIMIT', [active, maxActive])
        this.#activeBound.set(row.account, active)
      }
      bytes.check(row.account, row.bytes, maxStoredBytes)
      this.#insert.run(row)
      bytes.addTo(row.account, row.bytes)
      if (!isTerminal(row.status)) this.#bump(row.account, 1)
      timeline.start(row.id, createdEvent({ createdAt: row.created_at, owner: row.owner }))
    }, backendError)
    this.#sweep = db.transaction((now: number) => {
      bytes.sweep(now)
      timeline.sweep(now)
      sweepInputs.run(now)
      return sweepTasks.run(now).changes
    })
  }

  async create (task: TaskRecord, options: TaskCreateOptions = {}): Promise<void> {
    // The count and the insert hold the write lock together (the batch's transaction is IMMEDIATE).
    const row = toRow(task)
    await this.#creates.write({
      row: { ...row, account: options.account ?? task.principal, bytes: rowTaskBytes(row) },
      maxActive: options.maxActive,
      maxStoredBytes: options.maxStoredBytes,
    })
  }

  async get (id: string, now: number): Promise<TaskRecord | null> {
    const recent = this.#recent.get(id)
    if (recent !== undefined) return live(recent, now) ? recent : null
    return backend(() => {
      const row = this.#select.get({ id, now })
      return row ? this.#recent.set(id, toTask(row), rowBytes(row)) : null
    })
  }

  async list (principal: string, after: TaskCursor | undefined, limit: number, now: number): Promise<TaskRecord[]> {
    return backend(() => {
      const bounded = Math.max(0, limit)
      const rows = after
        ? this.#listAfter.all({ principal, createdAt: after.createdAt, id: after.id, limit: bounded, now })
        : this.#listFirst.all({ principal, limit: bounded, now })
      return rows.map(toTask)
    })
  }

  async query (query: TaskQuery, before: TaskCursor | undefined, limit: number, now: number): Promise<TaskRecord[]> {
    return backend(() => this.#query.rows(query, before, limit, now).map(toTask))
  }

  async transition (id: string, from: readonly TaskStatus[], to: TaskStatus, patch: TaskPatch, now: number): Promise<TaskRecord | null> {
    // Only a move of the table: a terminal task never changes, whatever `from` says.
    const sources = from.filter((status) => canTransition(status, to))
    if (sources.length === 0) return null
    return backend(() => {
      const outcome = patch.outcome === undefined ? null : JSON.stringify(patch.outcome)
      // IMMEDIATE: the move reads the sizes it changes first, and must hold the write lock from that read on.
      const row = this.#transition.immediate({
        event: statusEvent(to, patch, now, outcome ?? undefined),
        outcomeBytes: outcome === null ? undefined : Buffer.byteLength(outcome),
        maxStoredBytes: patch.maxStoredBytes,
        id,
        from: JSON.stringify(sources),
        to,
        keepMessage: patch.statusMessage === undefined ? 1 : 0,
        // Only a running task needs its arguments (to run again after a takeover).
        ended: isTerminal(to) ? 1 : 0,
        statusMessage: patch.statusMessage ?? null,
        outcome,
        setResume: patch.resume === undefined ? 0 : 1,
        resume: patch.resume == null ? null : JSON.stringify(patch.resume),
        asOwner: patch.asOwner ?? null,
        now,
      })
      if (row === undefined) return null
      const task = this.#recent.set(id, toTask(row), rowBytes(row))
      if (isTerminal(to)) this.#bump(row.account, -1)
      return task
    })
  }

  /** Moves an account's bound of running tasks, when it has one (an account without one is counted first). */
  #bump (account: string, by: 1 | -1): void {
    const bound = this.#activeBound.get(account)
    if (bound !== undefined) this.#activeBound.set(account, Math.max(0, bound + by))
  }

  async countActive (account: string, now: number, atMost = Number.MAX_SAFE_INTEGER): Promise<number> {
    return backend(() => this.#countActive.get({ account, now, limit: atMost })!.count)
  }

  /** The bytes of each account, which the session store counts into too (same file, same transactions). */
  get accountBytes (): SqliteAccountBytes {
    return this.#bytes
  }

  async storedBytes (account: string): Promise<number> {
    return backend(() => this.#bytes.of(account))
  }

  async unfinished (): Promise<TaskRecord[]> {
    return backend(() => this.#unfinished.all().map(toTask))
  }

  async ownedBy (owner: string, now: number): Promise<TaskRecord[]> {
    return backend(() => this.#ownedBy.all({ owner, now }).map(toTask))
  }

  /** Read from the file, not from the records kept in memory: another process may have taken the file and the task over. */
  async ownerOf (id: string, now: number): Promise<string | null> {
    return backend(() => this.#ownerOf.get({ id, now })?.owner ?? null)
  }

  async claim (id: string, from: string, to: string, now: number): Promise<TaskRecord | null> {
    return backend(() => {
      const row = this.#claimTx({ id, from, to, now })
      return row ? this.#recent.set(id, toTask(row), rowBytes(row)) : null
    })
  }

  /** Commits the creations still waiting for the end of this turn of the event loop (before the file closes). */
  flushWrites (): void {
    this.#creates.flush()
  }

  async sweep (now: number): Promise<number> {
    return backend(() => {
      this.#recent.clear()
      return this.#sweep(now)
    })
  }

  async addInput (input: InputRecord, maxPending: number, maxStoredBytes?: number): Promise<void> {
    this.#inputs.add(input, maxPending, maxStoredBytes)
  }

  async getInput (key: string): Promise<InputRecord | null> {
    return this.#inputs.get(key)
  }

  async pendingInputs (taskId: string): Promise<InputRecord[]> {
    return this.#inputs.pendingOf(taskId)
  }

  async inputsOf (taskId: string): Promise<InputRecord[]> {
    return this.#inputs.allOf(taskId)
  }

  async settleInput (key: string, state: 'answered' | 'expired', answer: TaskOutcome | null, now = Date.now()): Promise<boolean> {
    return this.#inputs.settle(key, state, answer, now)
  }

  async timeline (taskId: string): Promise<TaskEvent[]> {
    return backend(() => this.#timeline.of(taskId))
  }
}
