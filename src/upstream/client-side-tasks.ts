import { randomBytes } from 'node:crypto'
import { ProtocolError } from '@modelcontextprotocol/client'
import type { JsonObject } from '../wire/jsonrpc.ts'
import { TERMINAL_STATUSES, type TaskStatus } from '../wire/task-state.ts'
import type { InputMethod } from './call-attribution.ts'

/** The requests of a 2025-11-25 server about the tasks its client runs for it. */
export const CLIENT_TASK_METHODS = ['tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel'] as const
export type ClientTaskMethod = typeof CLIENT_TASK_METHODS[number]

export function isClientTaskMethod (method: string): method is ClientTaskMethod {
  return (CLIENT_TASK_METHODS as readonly string[]).includes(method)
}

const RELATED_TASK = 'io.modelcontextprotocol/related-task'
/** How long a task is kept when the server names no `ttl`, and the longest it may name. */
export const DEFAULT_CLIENT_TASK_TTL_MS = 300_000
export const MAX_CLIENT_TASK_TTL_MS = 3_600_000
/** How many tasks one upstream session keeps at once (the oldest ended one goes first to make room). */
export const MAX_CLIENT_TASKS = 1000

/** A client-side task never waits on input of its own: the gateway asks the client for the one request it is. */
type Status = Exclude<TaskStatus, 'input_required'>

interface ClientSideTask {
  readonly taskId: string
  status: Status
  statusMessage: string | undefined
  readonly createdAt: string
  lastUpdatedAt: string
  readonly ttl: number
  outcome: { result: JsonObject } | { error: ProtocolError } | undefined
  readonly stop: AbortController
  readonly ended: Promise<void>
  readonly expiry: NodeJS.Timeout
}

/** Which task capability of the client a task-augmented request needs (`tasks.requests.<…>`). */
function declaredFor (capabilities: JsonObject, method: InputMethod): boolean {
  const requests = (capabilities.tasks as JsonObject | undefined)?.requests as Record<string, JsonObject | undefined> | undefined
  if (method === 'sampling/createMessage') return requests?.sampling?.createMessage !== undefined
  if (method === 'elicitation/create') return requests?.elicitation?.create !== undefined
  return false
}

function notFound (taskId: unknown): ProtocolError {
  return new ProtocolError(-32602, `Failed to retrieve task: Task not found (${String(taskId)})`)
}

/**
 * The tasks the gateway runs on behalf of its client for one upstream session, when the client declared that
 * it runs sampling or elicitation requests as tasks (`tasks.requests`, 2025-11-25). The upstream session
 * declares what the client declared, so the server offers the client what it would offer it directly; a
 * task-augmented request (`params.task`) is then answered by the gateway at once with a task of its own,
 * and the plain request goes to the client by the usual way (live on the call's stream, or queued for a task
 * of the gateway). The server polls this task with `tasks/get`, reads the client's answer with `tasks/result`,
 * and may list or cancel it. So the request is asked once, whether or not the client is connected when the
 * server asks, and a call that runs as a task of the gateway needs nothing of the client but its answer.
 */
export class ClientSideTasks {
  readonly #tasks = new Map<string, ClientSideTask>()
  #closed = false

  /** Whether a task-augmented `method` from the upstream is to run as such a task (the client declared it). */
  accepts (capabilities: JsonObject, method: InputMethod): boolean {
    return declaredFor(capabilities, method)
  }

  /**
   * Starts a task for a task-augmented request and returns its `CreateTaskResult` at once. `run` gets the
   * plain request answered by the client; it is aborted when the server cancels the task, when the task
   * expires, or when the session closes.
   */
  create (requested: JsonObject | undefined, run: (signal: AbortSignal) => Promise<JsonObject>): JsonObject {
    if (this.#closed) throw new ProtocolError(-32603, 'the upstream session is closing')
    this.#makeRoom()
    const asked = requested?.ttl
    const ttl = typeof asked === 'number' && Number.isFinite(asked) && asked > 0 ? Math.min(asked, MAX_CLIENT_TASK_TTL_MS) : DEFAULT_CLIENT_TASK_TTL_MS
    const now = new Date().toISOString()
    const taskId = randomBytes(16).toString('base64url')
    const stop = new AbortController()
    let settle!: () => void
    const ended = new Promise<void>((resolve) => { settle = resolve })
    const expiry = setTimeout(() => this.#forget(taskId), ttl)
    expiry.unref()
    const task: ClientSideTask = { taskId, status: 'working', statusMessage: undefined, createdAt: now, lastUpdatedAt: now, ttl, outcome: undefined, stop, ended, expiry }
    this.#tasks.set(taskId, task)
    run(stop.signal).then(
      (result) => this.#end(task, 'completed', { result }),
      (err: unknown) => this.#end(task, 'failed', { error: asProtocolError(err) }),
    ).finally(settle)
    return { task: render(task) }
  }

  /** Answers the server's `tasks/get`, `tasks/result`, `tasks/list` or `tasks/cancel`. */
  async answer (method: ClientTaskMethod, params: JsonObject, signal: AbortSignal): Promise<JsonObject> {
    if (method === 'tasks/list') return { tasks: [...this.#tasks.values()].map(render) }
    const task = this.#tasks.get(String(params.taskId))
    if (task === undefined) throw notFound(params.taskId)
    if (method === 'tasks/get') return render(task)
    if (method === 'tasks/cancel') return this.#cancel(task)
    await Promise.race([task.ended, new Promise((resolve) => { signal.addEventListener('abort', resolve, { once: true }) })])
    signal.throwIfAborted()
    const outcome = task.outcome
    if (outcome === undefined) throw new ProtocolError(-32603, `Task ${task.taskId} was cancelled before it had a result`)
    if ('error' in outcome) throw outcome.error
    const meta = outcome.result._meta as JsonObject | undefined
    return { ...outcome.result, _meta: { ...meta, [RELATED_TASK]: { taskId: task.taskId } } }
  }

  /** The session closed: every task still running is stopped, and all are forgotten. */
  close (): void {
    this.#closed = true
    for (const taskId of [...this.#tasks.keys()]) this.#forget(taskId)
  }

  get size (): number {
    return this.#tasks.size
  }

  #cancel (task: ClientSideTask): JsonObject {
    if (TERMINAL_STATUSES.includes(task.status)) throw new ProtocolError(-32602, `Cannot cancel task in terminal status: ${task.status}`)
    this.#move(task, 'cancelled', 'The server cancelled the task.')
    task.stop.abort(new Error('the server cancelled the task'))
    return render(task)
  }

  #end (task: ClientSideTask, status: Exclude<Status, 'working'>, outcome: NonNullable<ClientSideTask['outcome']>): void {
    if (task.status !== 'working') return
    task.outcome = outcome
    this.#move(task, status, 'error' in outcome ? outcome.error.message : undefined)
  }

  #move (task: ClientSideTask, status: Status, statusMessage: string | undefined): void {
    task.status = status
    task.statusMessage = statusMessage
    task.lastUpdatedAt = new Date().toISOString()
  }

  #forget (taskId: string): void {
    const task = this.#tasks.get(taskId)
    if (task === undefined) return
    this.#tasks.delete(taskId)
    clearTimeout(task.expiry)
    task.stop.abort(new Error('the task expired or its session closed'))
  }

  #makeRoom (): void {
    if (this.#tasks.size < MAX_CLIENT_TASKS) return
    const oldestEnded = [...this.#tasks.values()].find((task) => task.status !== 'working')
    if (oldestEnded === undefined) throw new ProtocolError(-32603, `the gateway runs ${MAX_CLIENT_TASKS} tasks for this client already`)
    this.#forget(oldestEnded.taskId)
  }
}

function asProtocolError (err: unknown): ProtocolError {
  if (err instanceof ProtocolError) return err
  return new ProtocolError(-32603, err instanceof Error ? err.message : String(err))
}

/** The Task object of the 2025-11-25 wire. */
function render (task: ClientSideTask): JsonObject {
  return {
    taskId: task.taskId,
    status: task.status,
    ...(task.statusMessage !== undefined && { statusMessage: task.statusMessage }),
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    ttl: task.ttl,
  }
}
