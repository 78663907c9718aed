import type { Live } from '../config/live.ts'
import type { Logger } from '../observability/logger.ts'
import type { TasksConfig } from '../config/schema.ts'
import { GatewayError, RpcError, isHandover } from '../errors.ts'
import type { JsonObject, RpcResponse } from '../wire/jsonrpc.ts'
import { BUS, publishOn, subscribeTo } from '../store/bus-channels.ts'
import type { InputRecord, SignalBus, TaskRecord, TaskStore } from '../store/types.ts'
import type { TaskEvents } from './task-events.ts'
import { whileStoreUnavailable } from './store-retry.ts'
import { moveTask, type TaskMoveDeps } from './task-moves.ts'
import { RESUME, sourcesOf } from '../wire/task-state.ts'
import { ignoreWithTrace, settled } from '../observability/ignored.ts'
import { randomId } from '../wire/random-id.ts'

export interface TaskInputsDeps {
  store: TaskStore
  events: TaskEvents
  config: Live<TasksConfig>
  bus: SignalBus
  /** This gateway process, named in the timeline entries of the moves it makes. */
  processId: string
  /** The bytes one principal's tasks may store (limits.storedBytesPerPrincipal), read at each input; absent: none. */
  budget?: Live<StoredBytesBudget>
  log: Logger
}

/** The budget of stored bytes of each principal (limits.storedBytesPerPrincipal); undefined: none. */
export interface StoredBytesBudget {
  readonly storedBytesPerPrincipal?: number | undefined
}

interface Waiter {
  resolve (result: JsonObject): void
  reject (err: unknown): void
}

/** How often a waiting input request reads the store for an answer whose signal was lost. */
const RECHECK_MS = 5000

/** What the client is asked, in a few words, for the task's statusMessage. */
export function describeInput (method: string, params: JsonObject): string {
  if (method === 'elicitation/create') {
    const message = typeof params.message === 'string' ? `: ${params.message.slice(0, 200)}` : ''
    return `waiting for the user to answer an elicitation request${message}`
  }
  if (method === 'sampling/createMessage') return 'waiting for the client to answer a sampling request'
  return `waiting for the client to answer ${method}`
}

/**
 * The input requests of running tasks. An upstream's elicitation, sampling or roots request is stored
 * as a pending input bound to the task and its principal, the task moves to input_required, and the
 * upstream request waits here until the client's answer arrives (on any connection) or the upstream
 * gives up waiting.
 */
export class TaskInputs {
  readonly #store: TaskStore
  readonly #events: TaskEvents
  readonly #config: TasksConfig
  readonly #waiting = new Map<string, Waiter>()

  readonly #bus: SignalBus
  /** This gateway process, named in the timeline entries of the moves it makes. */
  readonly #processId: string

  readonly #budget: StoredBytesBudget
  /** How this one moves a task (to input_required, and back). */
  readonly #moves: TaskMoveDeps

  readonly #log: Logger

  constructor (deps: TaskInputsDeps) {
    const { store, events, bus, log } = deps
    this.#budget = deps.budget ?? {}
    this.#bus = bus
    this.#processId = deps.processId
    this.#store = store
    this.#events = events
    this.#config = deps.config
    this.#log = log
    this.#moves = { store, events, bus, log }
  }

  /**
   * Queues an input request for the task's client and waits for the answer. `upstreamRequestId`: the upstream's
   * own id of the request, kept with it so that a process adopting the task can still answer the upstream.
   */
  async ask (
    task: TaskRecord,
    method: string,
    params: JsonObject,
    signal: AbortSignal,
    upstreamRequestId?: string | number,
  ): Promise<JsonObject> {
    // A resumed task's upstream may ask again what it asked an earlier owner (a replayed stream): the same request.
    if (task.resume !== null && upstreamRequestId !== undefined) {
      const asked = (await this.#store.inputsOf(task.id)).find((input) => input.upstreamRequestId === upstreamRequestId && input.state !== 'expired')
      if (asked?.answer != null) {
        if ('error' in asked.answer) throw new RpcError(asked.answer.error.code, asked.answer.error.message, asked.answer.error.data)
        return asked.answer.result
      }
      if (asked !== undefined) return await this.awaitAnswer(asked, signal)
    }
    const now = Date.now()
    const input: InputRecord = {
      key: `in-${randomId()}`,
      taskId: task.id,
      principal: task.principal,
      method,
      params,
      state: 'pending',
      createdAt: now,
      answer: null,
    }
    if (upstreamRequestId !== undefined) input.upstreamRequestId = upstreamRequestId
    await this.#store.addInput(input, this.#config.maxQueuedInputs, this.#budget.storedBytesPerPrincipal)
    const answer = await this.#wait(input, signal, async () => {
      const asking = { statusMessage: describeInput(method, params), by: this.#processId, asOwner: task.owner }
      const updated = await moveTask(this.#moves, task.id, { from: sourcesOf('input_required'), to: 'input_required' }, asking, now)
      if (!updated) await this.#expire(input, new GatewayError('GW_ERR_INPUT_EXPIRED', [method]))
      else this.#events.input(updated, input)
    })
    await this.#fence(task, input.key)
    return answer
  }

  /**
   * Throws GW_ERR_TASK_HANDED_OVER (the upstream is not answered from here) when another process owns the task
   * now: this one was paused past its lease, and the new owner passes the answer on; it is told the answer is
   * there. While the store is unreachable the answer goes on: no process takes a task over without the store.
   */
  async #fence (task: TaskRecord, key: string): Promise<void> {
    const owner = await this.#store.ownerOf(task.id, Date.now()).catch(() => task.owner)
    if (owner === task.owner) return
    await publishOn(this.#bus, BUS.input, key, { key }).catch(ignoreWithTrace(this.#log, 'the new owner of a task was not told that an answer is stored; the answer stays in the store', { taskId: task.id }))
    throw new GatewayError('GW_ERR_TASK_HANDED_OVER', ['it took the task over while this one was paused; it passes the answer on'])
  }

  /**
   * Waits for the answer to an input request another process queued (this one adopted its task); the client
   * already sees it. An input answered meanwhile resolves at once.
   */
  async awaitAnswer (input: InputRecord, signal: AbortSignal): Promise<JsonObject> {
    return await this.#wait(input, signal, async () => { await this.#deliverStored(input.key) })
  }

  /** Waits for the answer to `input` once `started` (which may settle it) has run. */
  async #wait (input: InputRecord, signal: AbortSignal, started: () => Promise<void>): Promise<JsonObject> {
    const answered = new Promise<JsonObject>((resolve, reject) => {
      this.#waiting.set(input.key, { resolve, reject })
    })
    // It may be settled while `started` runs (a move the store refuses expires it at once): never an unhandled rejection.
    void settled(answered)
    // The answer may be posted to another gateway process: it stores it and signals this one.
    const unsubscribe = subscribeTo(this.#bus, BUS.input, input.key, () => { void this.#deliverStored(input.key) })
    // Signals are at most once (one can be lost to a Redis outage or race a new subscription): read the store now and then too.
    const recheck = setInterval(() => { void this.#deliverStored(input.key) }, RECHECK_MS)
    recheck.unref()
    // A task handed over to another process keeps its input pending: the process adopting it waits for the answer.
    const onAbort = (): void => {
      if (isHandover(signal.reason)) this.#waiting.get(input.key)?.reject(signal.reason)
      else void this.#expire(input, signal.reason)
    }
    signal.addEventListener('abort', onAbort, { once: true })
    try {
      await started()
      return await answered
    } finally {
      unsubscribe()
      clearInterval(recheck)
      signal.removeEventListener('abort', onAbort)
      this.#waiting.delete(input.key)
    }
  }

  /**
   * Resolves a local waiter from the answer another process stored. The signal came over the bus, so the
   * answer is stored: while the store is unreachable the read is retried for as long as the upstream waits.
   */
  async #deliverStored (key: string): Promise<void> {
    let input: InputRecord | null
    try {
      input = await whileStoreUnavailable(async () => this.#waiting.has(key) ? await this.#store.getInput(key) : null, { until: undefined })
    } catch {
      return
    }
    const waiter = this.#waiting.get(key)
    if (!waiter || !input || input.state !== 'answered' || input.answer === null) return
    if ('error' in input.answer) waiter.reject(new RpcError(input.answer.error.code, input.answer.error.message, input.answer.error.data))
    else waiter.resolve(input.answer.result)
  }

  /** A client's JSON-RPC response to an input; false when `principal` has no pending input with that id. */
  async answer (principal: string, response: RpcResponse): Promise<boolean> {
    if (typeof response.id !== 'string') return false
    const input = await this.#store.getInput(response.id)
    if (!input || input.principal !== principal || input.state !== 'pending') return false
    const outcome = 'error' in response ? { error: response.error } : { result: response.result }
    if (!await this.#store.settleInput(input.key, 'answered', outcome, Date.now())) return false
    const waiter = this.#waiting.get(input.key)
    if (!waiter) await publishOn(this.#bus, BUS.input, input.key, { key: input.key })
    else if ('error' in response) waiter.reject(new RpcError(response.error.code, response.error.message, response.error.data))
    else waiter.resolve(response.result)
    // The answer is stored and on its way: a failure to move the task back to working must not fail it
    // (the client would send it again and be told nobody waits). The task's next move corrects its status.
    await this.#afterSettle(input, null).catch(ignoreWithTrace(this.#log, 'an answered input left its task input_required; the task\'s next move corrects it', { taskId: input.taskId }))
    return true
  }

  /** Expires every pending input of a task (it ended, or the gateway restarted). */
  async expireAll (taskId: string, reason: unknown): Promise<void> {
    for (const input of await this.#store.pendingInputs(taskId)) {
      if (await this.#store.settleInput(input.key, 'expired', null, Date.now())) this.#waiting.get(input.key)?.reject(reason)
    }
  }

  /**
   * The upstream stopped waiting (or the task cannot wait): settles the input as expired and rejects its
   * waiter. Never rejects: it runs from abort listeners. When the store is unreachable the waiter is still
   * released; the input stays pending in the store until the task ends, which expires all its inputs.
   */
  async #expire (input: InputRecord, reason: unknown): Promise<void> {
    let settled: boolean
    try {
      settled = await this.#store.settleInput(input.key, 'expired', null, Date.now())
    } catch {
      this.#waiting.get(input.key)?.reject(reason)
      return
    }
    if (!settled) return
    this.#waiting.get(input.key)?.reject(reason)
    await this.#afterSettle(input, `the upstream stopped waiting for the answer to ${input.method}`)
      .catch(ignoreWithTrace(this.#log, 'an expired input left its task input_required; the task\'s next move corrects it', { taskId: input.taskId }))
  }

  /** Back to working once nothing is outstanding; the client is told either way. */
  async #afterSettle (input: InputRecord, message: string | null): Promise<void> {
    const pending = await this.#store.pendingInputs(input.taskId)
    const now = Date.now()
    const updated = pending.length === 0
      ? await moveTask(this.#moves, input.taskId, RESUME, { statusMessage: message, by: this.#processId }, now)
      : null
    const task = updated ?? await this.#store.get(input.taskId, now)
    if (task) this.#events.inputSettled(task, input.key)
  }
}
