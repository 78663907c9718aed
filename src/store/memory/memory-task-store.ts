import { GatewayError } from '../../errors.ts'
import { canTransition, isTerminal, type TaskStatus } from '../../wire/task-state.ts'
import { deepFreeze } from '../recent-records.ts'
import { claimedEvent, createdEvent, inputEvent, settledEvent, statusEvent, TIMELINE_LIMIT } from '../task-timeline.ts'
import { AccountBytes, jsonBytes, overBudget, taskBytes } from '../stored-bytes.ts'
import type { InputRecord, TaskCreateOptions, TaskCursor, TaskEvent, TaskOutcome, TaskPatch, TaskQuery, TaskRecord, TaskStore } from '../types.ts'
import { ExpiryQueue } from './expiry-queue.ts'
import { byPosition, TaskOrder } from './task-order.ts'

function live (task: TaskRecord, now: number): boolean {
  return task.ttlMs === null || task.createdAt + task.ttlMs > now
}

function expiresAt (task: TaskRecord): number {
  return task.ttlMs === null ? Infinity : task.createdAt + task.ttlMs
}

/** A deep copy nothing can change: what the store keeps and hands out, so a read needs no copy. */
function frozen<T> (value: T): T {
  return deepFreeze(structuredClone(value))
}

/** What the store keeps beside a task for its account's limits. */
interface Accounting {
  account: string
  /** Everything the task stores (see TaskCreateOptions.maxStoredBytes). */
  bytes: number
  /** Of which its request (dropped when the task ends) and its outcome. */
  requestBytes: number
  outcomeBytes: number
}

/**
 * Tasks and their input queues in Maps. A task record is copied and frozen on the way in and replaced, never
 * changed, by a move: reads hand out the stored record itself (a task is read far more often than written).
 * Input records are copied on the way in and out.
 */
export class MemoryTaskStore implements TaskStore {
  readonly #tasks = new Map<string, TaskRecord>()
  readonly #inputs = new Map<string, InputRecord>()
  /** Input keys per task, in insertion order. */
  readonly #inputsByTask = new Map<string, Set<string>>()
  /** Ids of the tasks of each account that are not terminal, so counting them does not scan every task. */
  readonly #activeByAccount = new Map<string, Set<string>>()
  /** Each task's account and bytes. */
  readonly #accounting = new Map<string, Accounting>()
  /** The bytes each account stores (its sessions' too: the count is shared with the session store). */
  readonly #bytesByAccount: AccountBytes
  /** Each task's timeline, oldest first. */
  readonly #timelines = new Map<string, TaskEvent[]>()
  /** Each principal's tasks in list order, kept on write: a page is read without sorting the store. */
  readonly #byPrincipal = new Map<string, TaskOrder>()
  /** Task ids by the end of their TTL: the sweep takes the due ones without a walk over every task. */
  readonly #expiries = new ExpiryQueue()
  #listVisits = 0

  constructor (bytes = new AccountBytes()) {
    this.#bytesByAccount = bytes
  }

  async create (task: TaskRecord, options: TaskCreateOptions = {}): Promise<void> {
    // No await between the count and the insert: nothing else runs in between.
    // Counted only when the principal's unfinished tasks could reach the limit: fewer than it pass whatever their TTLs.
    const max = options.maxActive
    const account = options.account ?? task.principal
    if (max !== undefined && (this.#activeByAccount.get(account)?.size ?? 0) >= max) {
      const active = this.#countActive(account, task.createdAt, max)
      if (active >= max) throw new GatewayError('GW_ERR_TASK_LIMIT', [active, max])
    }
    const bytes = taskBytes(task)
    const refusal = overBudget(this.#bytesByAccount.of(account), bytes.total, options.maxStoredBytes)
    if (refusal) throw refusal
    this.#tasks.set(task.id, frozen(task))
    if (!isTerminal(task.status)) this.#activeOf(account).add(task.id)
    const outcomeBytes = task.outcome === null ? 0 : jsonBytes(task.outcome)
    this.#accounting.set(task.id, { account, bytes: 0, requestBytes: bytes.request, outcomeBytes })
    this.#count(task.id, bytes.total)
    this.#timelines.set(task.id, [createdEvent(task)])
    let order = this.#byPrincipal.get(task.principal)
    if (!order) {
      order = new TaskOrder()
      this.#byPrincipal.set(task.principal, order)
    }
    order.add({ createdAt: task.createdAt, id: task.id, expiresAt: expiresAt(task) })
    if (task.ttlMs !== null) this.#expiries.add(task.id, expiresAt(task))
  }

  /** Task records the list pages of this store have looked at so far (what a page costs, for tests and the bench). */
  get listVisits (): number {
    return this.#listVisits
  }

  /** Adds `bytes` (or, negative, removes them) to the task's count and its account's. */
  #count (taskId: string, bytes: number): void {
    const accounting = this.#accounting.get(taskId)
    if (!accounting || bytes === 0) return
    accounting.bytes += bytes
    this.#bytesByAccount.add(accounting.account, bytes)
  }

  #record (taskId: string, event: TaskEvent): void {
    const timeline = this.#timelines.get(taskId)
    if (!timeline) return
    timeline.push(event)
    if (timeline.length > TIMELINE_LIMIT) timeline.splice(0, timeline.length - TIMELINE_LIMIT)
  }

  #activeOf (account: string): Set<string> {
    let ids = this.#activeByAccount.get(account)
    if (!ids) {
      ids = new Set()
      this.#activeByAccount.set(account, ids)
    }
    return ids
  }

  #inactive (task: TaskRecord): void {
    const account = this.#accounting.get(task.id)?.account ?? task.principal
    const ids = this.#activeByAccount.get(account)
    if (!ids?.delete(task.id) || ids.size > 0) return
    this.#activeByAccount.delete(account)
  }

  async get (id: string, now: number): Promise<TaskRecord | null> {
    const task = this.#live(id, now)
    return task ?? null
  }

  async list (principal: string, after: TaskCursor | undefined, limit: number, now: number): Promise<TaskRecord[]> {
    const order = this.#byPrincipal.get(principal)
    if (!order) return []
    const visited = order.visited
    const ids = order.page(after, limit, now)
    this.#listVisits += order.visited - visited
    const tasks: TaskRecord[] = []
    for (const id of ids) {
      const task = this.#tasks.get(id)
      if (task) tasks.push(task)
    }
    return tasks
  }

  async query (query: TaskQuery, before: TaskCursor | undefined, limit: number, now: number): Promise<TaskRecord[]> {
    const matches = (task: TaskRecord): boolean => (query.status === undefined || task.status === query.status) &&
      (query.upstream === undefined || task.upstream === query.upstream) && (query.tool === undefined || task.tool === query.tool) &&
      (query.principal === undefined || task.principal === query.principal)
    const tasks = [...this.#tasks.values()]
      .filter((task) => matches(task) && live(task, now) && (!before || byPosition(task, before) < 0))
      .sort((a, b) => byPosition(b, a))
    return tasks.slice(0, Math.max(0, limit))
  }

  async transition (id: string, from: readonly TaskStatus[], to: TaskStatus, patch: TaskPatch, now: number): Promise<TaskRecord | null> {
    const task = this.#live(id, now)
    // Only a move of the table: a terminal task never changes, whatever `from` says.
    if (!task || !from.includes(task.status) || !canTransition(task.status, to)) return null
    if (patch.asOwner !== undefined && task.owner !== patch.asOwner) return null
    const accounting = this.#accounting.get(id)
    const outcome = patch.outcome === undefined ? undefined : JSON.stringify(patch.outcome)
    const outcomeBytes = outcome === undefined ? undefined : Buffer.byteLength(outcome)
    let change = 0
    if (accounting) {
      change = (isTerminal(to) ? -accounting.requestBytes : 0) + (outcomeBytes === undefined ? 0 : outcomeBytes - accounting.outcomeBytes)
      const refusal = overBudget(this.#bytesByAccount.of(accounting.account), change, patch.maxStoredBytes)
      if (refusal) throw refusal
      if (isTerminal(to)) accounting.requestBytes = 0
      if (outcomeBytes !== undefined) accounting.outcomeBytes = outcomeBytes
    }
    const moved: TaskRecord = {
      ...task,
      status: to,
      // Only a running task needs its arguments (to run again after a takeover).
      request: isTerminal(to) ? Object.freeze({}) : task.request,
      statusMessage: patch.statusMessage !== undefined ? patch.statusMessage : task.statusMessage,
      outcome: patch.outcome !== undefined ? frozen(patch.outcome) : task.outcome,
      resume: isTerminal(to) ? null : patch.resume !== undefined ? frozen(patch.resume) : task.resume,
      lastUpdatedAt: now,
    }
    this.#tasks.set(id, Object.freeze(moved))
    this.#count(id, change)
    if (isTerminal(to)) this.#inactive(moved)
    this.#record(id, statusEvent(to, patch, now, outcome))
    return moved
  }

  async countActive (account: string, now: number, atMost = Number.MAX_SAFE_INTEGER): Promise<number> {
    return this.#countActive(account, now, atMost)
  }

  async storedBytes (account: string): Promise<number> {
    return this.#bytesByAccount.of(account)
  }

  #countActive (account: string, now: number, atMost: number): number {
    let count = 0
    for (const id of this.#activeByAccount.get(account) ?? []) {
      const task = this.#tasks.get(id)
      if (task && live(task, now) && ++count >= atMost) break
    }
    return count
  }

  async unfinished (): Promise<TaskRecord[]> {
    return [...this.#tasks.values()]
      .filter((task) => !isTerminal(task.status))
      .sort(byPosition)
  }

  async ownedBy (owner: string, now: number): Promise<TaskRecord[]> {
    return [...this.#tasks.values()]
      .filter((task) => task.owner === owner && !isTerminal(task.status) && live(task, now))
      .sort(byPosition)
  }

  async claim (id: string, from: string, to: string, now: number): Promise<TaskRecord | null> {
    const task = this.#live(id, now)
    if (!task || isTerminal(task.status) || task.owner !== from) return null
    const claimed = Object.freeze({ ...task, owner: to })
    this.#tasks.set(id, claimed)
    this.#record(id, claimedEvent(from, to, now))
    return claimed
  }

  async ownerOf (id: string, now: number): Promise<string | null> {
    const task = this.#live(id, now)
    return task && !isTerminal(task.status) ? task.owner : null
  }

  async sweep (now: number): Promise<number> {
    let swept = 0
    for (const id of this.#expiries.takeDue(now)) {
      const task = this.#tasks.get(id)
      if (!task || live(task, now)) continue
      const order = this.#byPrincipal.get(task.principal)
      if (order?.remove(task) && order.size === 0) this.#byPrincipal.delete(task.principal)
      this.#inactive(task)
      this.#count(id, -(this.#accounting.get(id)?.bytes ?? 0))
      this.#accounting.delete(id)
      this.#tasks.delete(id)
      for (const key of this.#inputsByTask.get(id) ?? []) this.#inputs.delete(key)
      this.#inputsByTask.delete(id)
      this.#timelines.delete(id)
      swept++
    }
    return swept
  }

  async addInput (input: InputRecord, maxPending: number, maxStoredBytes?: number): Promise<void> {
    if (!this.#tasks.has(input.taskId)) throw new GatewayError('GW_ERR_TASK_NOT_FOUND', [input.taskId])
    const keys = this.#inputsByTask.get(input.taskId) ?? new Set<string>()
    let pending = 0
    for (const key of keys) if (this.#inputs.get(key)?.state === 'pending') pending++
    if (pending >= maxPending) throw new GatewayError('GW_ERR_TASK_INPUT_LIMIT', [input.taskId, maxPending])
    const bytes = jsonBytes(input.params)
    const account = this.#accounting.get(input.taskId)?.account
    const refusal = account === undefined ? undefined : overBudget(this.#bytesByAccount.of(account), bytes, maxStoredBytes)
    if (refusal) throw refusal
    this.#count(input.taskId, bytes)
    this.#inputs.set(input.key, structuredClone(input))
    keys.add(input.key)
    this.#inputsByTask.set(input.taskId, keys)
    this.#record(input.taskId, inputEvent(input))
  }

  async getInput (key: string): Promise<InputRecord | null> {
    const input = this.#inputs.get(key)
    return input ? structuredClone(input) : null
  }

  async pendingInputs (taskId: string): Promise<InputRecord[]> {
    return (await this.inputsOf(taskId)).filter((input) => input.state === 'pending')
  }

  async inputsOf (taskId: string): Promise<InputRecord[]> {
    const inputs: InputRecord[] = []
    for (const key of this.#inputsByTask.get(taskId) ?? []) {
      const input = this.#inputs.get(key)
      if (input) inputs.push(structuredClone(input))
    }
    // Stable: inputs created in the same millisecond stay in insertion order.
    return inputs.sort((a, b) => a.createdAt - b.createdAt)
  }

  async settleInput (key: string, state: 'answered' | 'expired', answer: TaskOutcome | null, now = Date.now()): Promise<boolean> {
    const input = this.#inputs.get(key)
    if (input?.state !== 'pending') return false
    input.state = state
    input.answer = structuredClone(answer)
    if (answer !== null) this.#count(input.taskId, jsonBytes(answer))
    this.#record(input.taskId, settledEvent(key, state, now))
    return true
  }

  async timeline (taskId: string): Promise<TaskEvent[]> {
    return structuredClone(this.#timelines.get(taskId) ?? [])
  }

  #live (id: string, now: number): TaskRecord | undefined {
    const task = this.#tasks.get(id)
    return task && live(task, now) ? task : undefined
  }
}
