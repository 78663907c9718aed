import { randomBytes } from 'node:crypto'
import { isObject, type JsonObject, type RpcMessage, type RpcRequest } from '../../wire/jsonrpc.ts'
import { BUS, publishOn, subscribeTo, type PayloadOf } from '../../store/bus-channels.ts'
import type { InputRecord, SignalBus, TaskRecord, TaskStore } from '../../store/types.ts'
import type { TaskEvents } from '../../tasks/task-events.ts'
import { isTerminal } from '../../wire/task-state.ts'
import { RELATED_TASK, relatedTaskMeta, renderInputRequest, renderTask } from './task-wire.ts'
import type { EventStream } from '../../streams/event-stream.ts'
import type { StreamHub } from '../../streams/stream-hub.ts'
import { ignoreWithTrace } from '../../observability/ignored.ts'
import type { Logger } from '../../observability/logger.ts'
import { InputOffers } from './input-offers.ts'

type Send = (message: RpcMessage) => void

interface ResultStreams {
  sends: Send[]
  unsubscribe (): void
}

function relatedTaskId (request: RpcRequest): string | undefined {
  const related = (request.params?._meta as JsonObject | undefined)?.[RELATED_TASK]
  return isObject(related) && typeof related.taskId === 'string' ? related.taskId : undefined
}

/** A task's input request (its id is the input's key), as opposed to a notification or a response. */
function isInputRequest (message: RpcMessage): message is RpcRequest & { id: string } {
  return 'method' in message && 'id' in message && typeof message.id === 'string'
}

/**
 * Sends what a legacy-era task produces to its client. Input requests and progress go on the stream of
 * a pending `tasks/result` when there is one, in this process or another, else on the session's GET
 * stream (some clients never call `tasks/result` before the task ends); each goes on one stream only.
 * An input is offered once per client: a new `tasks/result` or GET stream, in any process, is offered the
 * task's unanswered inputs that no open stream carries (see InputOffers), and an input whose stream is gone
 * before it was answered is offered again, with the same id, on another stream of the task or session.
 * Status changes go to the session.
 *
 * Across processes: a process holding `tasks/result` streams of a task subscribes to the task's stream
 * channel, and the process running the task publishes there what no local stream takes; when no process
 * received it, it goes to the session's GET stream instead.
 */
export class LegacyTaskDelivery implements TaskEvents {
  readonly #hub: StreamHub
  readonly #bus: SignalBus
  readonly #store: TaskStore
  /** This process's address for offers (input requests to show on a GET stream it holds). */
  readonly #id = randomBytes(9).toString('base64url')
  readonly #streams = new Map<string, ResultStreams>()
  /** Per task, the messages on their way through the bus, so they arrive in order. */
  readonly #inTransit = new Map<string, Promise<void>>()
  /** Input requests of the tasks this process runs, per session, to offer again when a GET stream opens. */
  readonly #unanswered = new Map<string, Map<string, RpcRequest>>()
  /** The inputs offered on streams still open, in every process. */
  readonly #offers: InputOffers
  /** An input whose stream went away, not offered again: it stays pending for the session's next stream or tasks/result. */
  readonly #notOfferedAgain = (err: unknown): void => { this.#log.debug({ err }, 'an input was not offered again after its stream went away; it stays pending') }

  readonly #log: Logger

  constructor (hub: StreamHub, bus: SignalBus, store: TaskStore, log: Logger) {
    this.#hub = hub
    this.#bus = bus
    this.#store = store
    this.#log = log
    this.#offers = new InputOffers(bus, log)
    // A process announces there that a session opened a GET stream on it.
    subscribeTo(bus, BUS.getStream, undefined, ({ sessionId, from }) => {
      // A store failure here only means the inputs are not offered on this stream (they stay pending).
      this.#offerUnanswered(sessionId, from).catch(ignoreWithTrace(log, 'pending inputs were not offered on a new GET stream; they stay pending for the next one or tasks/result'))
    })
    // The inbox of this process for input requests to offer on a GET stream it holds.
    subscribeTo(bus, BUS.offer, this.#id, ({ sessionId, message }) => {
      hub.deliverLocal(sessionId, message as unknown as RpcMessage)
    })
  }

  /** The 2025-11-25 status notification on the task's session (the wake-up of every era's waiters is the move's: see moveTask). */
  status (task: TaskRecord): void {
    if (task.era !== '2025-11-25' || task.sessionId === null) return
    if (isTerminal(task.status)) this.#forget(task.sessionId, task.id)
    void this.#hub.publish(task.sessionId, { jsonrpc: '2.0', method: 'notifications/tasks/status', params: renderTask(task) })
  }

  input (task: TaskRecord, input: InputRecord): void {
    if (task.era !== '2025-11-25' || task.sessionId === null) return
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
    this.#offers.settled(key)
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

  /**
   * Registers a `tasks/result` stream of session `sessionId` for the task (also for the process running it,
   * wherever that is) and offers it every unanswered input no open stream carries; returns the unregister
   * function, which offers what the stream carried unanswered to another stream.
   */
  async attachResultStream (taskId: string, send: Send, sessionId?: string): Promise<() => void> {
    const holds: Array<{ release: () => boolean, request: RpcRequest }> = []
    const offer: Send = (message) => {
      // Held first: every process knows where the request is before its client can have seen it.
      if (isInputRequest(message)) holds.push({ release: this.#offers.hold(message.id), request: message })
      send(message)
    }
    let streams = this.#streams.get(taskId)
    if (!streams) {
      // What a task sends to its `tasks/result` streams: the processes holding one subscribe to it.
      streams = { sends: [], unsubscribe: subscribeTo(this.#bus, BUS.taskStream, taskId, (payload) => { this.#received(taskId, payload) }) }
      this.#streams.set(taskId, streams)
    }
    streams.sends.push(offer)
    const unregister = (): void => {
      const current = this.#streams.get(taskId)
      if (!current) return
      const index = current.sends.indexOf(offer)
      if (index < 0) return
      current.sends.splice(index, 1)
      if (current.sends.length === 0) {
        current.unsubscribe()
        this.#streams.delete(taskId)
      }
      for (const { release, request } of holds.splice(0)) {
        if (release() && sessionId !== undefined) this.#offerAgain(taskId, sessionId, request).catch(this.#notOfferedAgain)
      }
    }
    try {
      // A publish waits until this process's own subscriptions are live: from here on, every input the
      // task asks for reaches this stream, and the ones asked before are in the store.
      await publishOn(this.#bus, BUS.taskStream, taskId, { probe: true })
      for (const input of await this.#store.pendingInputs(taskId)) {
        if (!await this.#offers.offered(input.key)) offer(renderInputRequest(input))
      }
    } catch (err) {
      unregister()
      throw err
    }
    return unregister
  }

  /**
   * A request went out on `stream`, a GET stream held here: a task's input is offered there until the stream is
   * gone, and offered again then if it is still unanswered.
   */
  offeredOn (request: RpcRequest, stream: EventStream): void {
    const taskId = relatedTaskId(request)
    if (taskId === undefined || !isInputRequest(request)) return
    const release = this.#offers.hold(request.id)
    stream.onDetach(() => {
      if (release()) this.#offerAgain(taskId, stream.sessionId, request).catch(this.#notOfferedAgain)
    })
  }

  /** A GET stream of the session opened here: every process offers it the inputs of the tasks it runs. */
  onGetStream (sessionId: string): void {
    void publishOn(this.#bus, BUS.getStream, undefined, { sessionId, from: this.#id })
  }

  /** Offers the process `to` the session's still unanswered inputs that no `tasks/result` stream carries. */
  async #offerUnanswered (sessionId: string, to: string): Promise<void> {
    const pending = this.#unanswered.get(sessionId)
    if (!pending) return
    for (const [key, request] of [...pending]) {
      const taskId = relatedTaskId(request)
      if (taskId !== undefined && await this.#carried(taskId)) continue
      if (await this.#offers.offered(key)) continue
      // The answer may have been posted to another process, which settled it without telling this one.
      const input = await this.#store.getInput(key)
      if (input?.state !== 'pending') {
        pending.delete(key)
        continue
      }
      if (to === this.#id) this.#hub.deliverLocal(sessionId, request)
      else await publishOn(this.#bus, BUS.offer, to, { sessionId, message: request as unknown as JsonObject })
    }
    if (pending.size === 0 && this.#unanswered.get(sessionId) === pending) this.#unanswered.delete(sessionId)
  }

  /**
   * The stream input `request` was offered on is gone before an answer came: offers it on a `tasks/result`
   * stream of the task, in this process or another, else on the session's GET stream (unless it was settled,
   * or is offered on another open stream meanwhile).
   */
  async #offerAgain (taskId: string, sessionId: string, request: RpcRequest): Promise<void> {
    const input = await this.#store.getInput(String(request.id))
    if (input?.state !== 'pending' || await this.#offers.offered(input.key)) return
    const local = this.#streams.get(taskId)?.sends[0]
    if (local) {
      local(request)
      return
    }
    if (await publishOn(this.#bus, BUS.taskStream, taskId, { message: request as unknown as JsonObject, sessionId }) > 0) return
    await this.#hub.publish(sessionId, request)
  }

  /** Whether some process holds a `tasks/result` stream of the task. */
  async #carried (taskId: string): Promise<boolean> {
    if (this.#streams.has(taskId)) return true
    return await publishOn(this.#bus, BUS.taskStream, taskId, { probe: true }) > 0
  }

  /** A message of a task another process runs, for the `tasks/result` streams held here. */
  #received (taskId: string, payload: PayloadOf<typeof BUS.taskStream>): void {
    if (!('message' in payload)) return
    const message = payload.message as unknown as RpcMessage
    const send = this.#streams.get(taskId)?.sends[0]
    if (send) send(message)
    // The stream ended as the message travelled: the session's GET stream gets it instead.
    else void this.#hub.publish(payload.sessionId, message)
  }

  /** Sends on a local `tasks/result` stream at once; anything else travels through the bus, in order. */
  #route (task: TaskRecord, message: RpcMessage): void {
    const earlier = this.#inTransit.get(task.id)
    if (earlier === undefined) {
      const local = this.#streams.get(task.id)?.sends[0]
      if (local) {
        local(message)
        return
      }
      if (task.sessionId === null) return
    }
    const sent = (earlier ?? Promise.resolve()).then(async () => await this.#deliver(task, message))
      .catch(ignoreWithTrace(this.#log, 'a message of a task was not delivered to its session; an input stays pending and is offered again on its next stream', { taskId: task.id }))
    this.#inTransit.set(task.id, sent)
    void sent.then(() => {
      if (this.#inTransit.get(task.id) === sent) this.#inTransit.delete(task.id)
    })
  }

  async #deliver (task: TaskRecord, message: RpcMessage): Promise<void> {
    const local = this.#streams.get(task.id)?.sends[0]
    if (local) {
      local(message)
      return
    }
    if (task.sessionId === null) return
    const payload = { message: message as unknown as JsonObject, sessionId: task.sessionId }
    if (await publishOn(this.#bus, BUS.taskStream, task.id, payload) > 0) return
    await this.#hub.publish(task.sessionId, message)
  }

  /** Drops the inputs of a task that ended from the ones to offer again. */
  #forget (sessionId: string, taskId: string): void {
    const pending = this.#unanswered.get(sessionId)
    if (!pending) return
    for (const [key, request] of pending) {
      if (relatedTaskId(request) !== taskId) continue
      pending.delete(key)
      // Expired with the task: the streams that carry it let it go.
      this.#offers.settled(key)
    }
    if (pending.size === 0) this.#unanswered.delete(sessionId)
  }
}
