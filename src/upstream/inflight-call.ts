import type { JsonObject } from '../wire/jsonrpc.ts'
import type { InputMethod } from './call-attribution.ts'

/** What the upstream running a call as a task of its own says of that task (either dialect). */
export interface UpstreamTaskStatus {
  taskId: string
  status: string
  statusMessage?: string | undefined
}

/** Where an upstream session sends what the upstream asks of the downstream client during one call. */
export interface CallSink {
  /** `upstreamRequestId`: the JSON-RPC id the upstream gave the request. */
  input (method: InputMethod, params: JsonObject, signal: AbortSignal, upstreamRequestId?: string | number): Promise<JsonObject>
  /** A notification of the upstream's to relay to the client (a log message). */
  notify (method: string, params: JsonObject): void
  /**
   * The status of the upstream's own task that runs the call: a gateway task shows its statusMessage; nothing
   * else is told of it (the client never saw that task).
   */
  upstreamTaskStatus? (status: UpstreamTaskStatus): void
  /**
   * What `input` asks stays answerable after the call ended (a 2025-era live relay: the client answers by the
   * request's id, on any stream). A request given to such a call by guess is then never asked again elsewhere.
   */
  readonly offersOutliveCall?: boolean
}

/**
 * Looks at the result of each response to one of a call's requests before the SDK does, and returns what the SDK
 * gets instead (the same object when nothing changes). See InflightCall.screenResults.
 */
export type ResultScreen = (result: JsonObject) => JsonObject

/**
 * One call (tools/call, prompts/get) in flight on an upstream session (see CallRegistry, which begins and ends
 * it). What is known of it while it runs (the upstream task it follows, whether its client owes an answer,
 * whether another process goes on with it) changes only through its methods, whoever learns it: the call's own
 * code, the session's inbound requests, its transport.
 */
export class InflightCall {
  readonly id: number
  /** The client the call runs for (its ClientRef key). */
  readonly owner: string
  /** A task's call: the largest result the task may store (tasks.maxResultBytes), which its answers are held to as they arrive. */
  readonly maxResultBytes: number | undefined
  readonly #sink: CallSink
  #upstreamTaskId: string | undefined
  /** Input requests of this call the client has not answered yet. */
  #asking = 0
  #handedOver = false
  #screen: ResultScreen | undefined

  constructor (id: number, owner: string, sink: CallSink, maxResultBytes: number | undefined) {
    this.id = id
    this.owner = owner
    this.#sink = sink
    this.maxResultBytes = maxResultBytes
  }

  /** The upstream's task id, when the upstream runs the call as a task of its own. */
  get upstreamTaskId (): string | undefined {
    return this.#upstreamTaskId
  }

  /** The upstream runs the call as its task `taskId`: what the upstream sends about that task belongs to this call. */
  follows (taskId: string): void {
    this.#upstreamTaskId = taskId
  }

  /** The call's client has not yet answered something the upstream asked during the call. */
  get awaitingClient (): boolean {
    return this.#asking > 0
  }

  /** What `ask` asks stays answerable after the call ended (see CallSink.offersOutliveCall). */
  get offersOutliveCall (): boolean {
    return this.#sink.offersOutliveCall === true
  }

  /** Asks the call's client what the upstream asked (`upstreamRequestId`: the id the upstream gave the request, or its key). */
  async ask (method: InputMethod, params: JsonObject, signal: AbortSignal, upstreamRequestId?: string | number): Promise<JsonObject> {
    this.#asking++
    try {
      return await this.#sink.input(method, params, signal, upstreamRequestId)
    } finally {
      this.#asking--
    }
  }

  /** A notification of the upstream's that belongs to the call (progress goes its own way). */
  notify (method: string, params: JsonObject): void {
    this.#sink.notify(method, params)
  }

  /** The upstream's task that runs the call has a new status (see CallSink.upstreamTaskStatus). */
  taskStatus (status: UpstreamTaskStatus): void {
    this.#sink.upstreamTaskStatus?.(status)
  }

  /** Another gateway process goes on with the call's upstream work: the upstream is told nothing of its end. */
  get handedOver (): boolean {
    return this.#handedOver
  }

  handOver (): void {
    this.#handedOver = true
  }

  /** From now on (until called with undefined), the results answering the call's requests pass `screen` first. */
  screenResults (screen: ResultScreen | undefined): void {
    this.#screen = screen
  }

  /** Called by the transport with the result of a response to one of the call's requests: what the SDK gets. */
  screened (result: JsonObject): JsonObject {
    return this.#screen === undefined ? result : this.#screen(result)
  }
}
