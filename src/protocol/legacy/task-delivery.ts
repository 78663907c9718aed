import type { JsonObject, RpcMessage, RpcRequest } from '../jsonrpc.ts'
import type { InputRecord, SignalBus, TaskRecord, TaskStore } from '../../store/types.ts'
import type { TaskEvents } from '../../tasks/task-events.ts'
import { relatedTaskMeta, renderInputRequest, renderTask } from './task-wire.ts'
import type { StreamHub } from './stream-hub.ts'

export function taskChannel (taskId: string): string {
  return `task:${taskId}`
}

type Send = (message: RpcMessage) => void

/**
 * Sends what a legacy-era task produces to its client. Input requests and progress go on the stream of
 * a pending `tasks/result` when there is one, else on the session's GET stream (some clients never call
 * `tasks/result` before the task ends). Unanswered inputs are offered again, with the same id, on every
 * new `tasks/result` and GET stream. Status changes go to the session and wake `tasks/result` waiters.
 */
export class LegacyTaskDelivery implements TaskEvents {
  readonly #hub: StreamHub
  readonly #bus: SignalBus
  readonly #store: TaskStore
  readonly #waiters = new Map<string, Send[]>()
  /** Unanswered input requests per session, to offer again when a GET stream opens. */
  readonly #unanswered = new Map<string, Map<string, RpcRequest>>()

  constructor (hub: StreamHub, bus: SignalBus, store: TaskStore) {
    this.#hub = hub
    this.#bus = bus
    this.#store = store
  }

  status (task: TaskRecord): void {
    void this.#bus.publish(taskChannel(task.id), { type: 'status', status: task.status })
    if (task.era !== 'legacy' || task.sessionId === null) return
    void this.#hub.publish(task.sessionId, { jsonrpc: '2.0', method: 'notifications/tasks/status', params: renderTask(task) })
  }

  input (task: TaskRecord, input: InputRecord): void {
    if (task.era !== 'legacy' || task.sessionId === null) return
    const request = renderInputRequest(input)
    let pending = this.#unanswered.get(task.sessionId)
    if (!pending) {
      pending = new Map()
      this.#unanswered.set(task.sessionId, pending)
    }
    pending.set(input.key, request)
    this.#route(task, request)
  }

  inputSettled (task: TaskRecord, key: string): void {
    if (task.sessionId === null) return
    const pending = this.#unanswered.get(task.sessionId)
    pending?.delete(key)
    if (pending?.size === 0) this.#unanswered.delete(task.sessionId)
  }

  progress (task: TaskRecord, progress: JsonObject): void {
    if (task.progressToken === null) return
    this.#route(task, {
      jsonrpc: '2.0',
      method: 'notifications/progress',
      params: { ...progress, progressToken: task.progressToken, _meta: relatedTaskMeta(task.id) },
    })
  }

  notification (task: TaskRecord, method: string, params: JsonObject): void {
    const meta = (params._meta ?? {}) as JsonObject
    this.#route(task, { jsonrpc: '2.0', method, params: { ...params, _meta: { ...meta, ...relatedTaskMeta(task.id) } } })
  }

  /** Registers a `tasks/result` stream for the task and offers it every unanswered input; returns the unregister function. */
  async attachResultStream (taskId: string, send: Send): Promise<() => void> {
    const list = this.#waiters.get(taskId) ?? []
    list.push(send)
    this.#waiters.set(taskId, list)
    for (const input of await this.#store.pendingInputs(taskId)) send(renderInputRequest(input))
    return () => {
      const current = this.#waiters.get(taskId)
      if (!current) return
      const index = current.indexOf(send)
      if (index >= 0) current.splice(index, 1)
      if (current.length === 0) this.#waiters.delete(taskId)
    }
  }

  /** A GET stream opened for the session: offer it the inputs no `tasks/result` stream is carrying. */
  onGetStream (sessionId: string): void {
    const pending = this.#unanswered.get(sessionId)
    if (!pending) return
    for (const request of pending.values()) {
      const taskId = ((request.params?._meta as JsonObject | undefined)?.['io.modelcontextprotocol/related-task'] as { taskId?: string } | undefined)?.taskId
      if (taskId === undefined || !this.#waiters.has(taskId)) this.#hub.deliverLocal(sessionId, request)
    }
  }

  #route (task: TaskRecord, message: RpcMessage): void {
    const waiter = this.#waiters.get(task.id)?.[0]
    if (waiter) waiter(message)
    else if (task.sessionId !== null) void this.#hub.publish(task.sessionId, message)
  }
}
