import { randomBytes } from 'node:crypto'
import { toWireError } from '../wire/error-replies.ts'
import { ERRORS, GatewayError, RpcError, type ErrorCode, type WireError } from '../errors.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import { BUS, publishOn, subscribeTo, type PayloadOf } from '../store/bus-channels.ts'
import type { LeaseStore, SignalBus } from '../store/types.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'
import type { Logger } from '../observability/logger.ts'

/**
 * Handles a request another gateway process sent to this one; its result (or error) goes back to the
 * sender. `emit` sends the sender an event before the result (in order), `from` names the sender.
 */
export type PeerHandler = (payload: JsonObject, signal: AbortSignal, emit: (event: JsonObject) => void, from: string) => Promise<JsonObject>

interface Waiting {
  resolve (result: JsonObject): void
  reject (err: unknown): void
  onEvent: ((event: JsonObject) => void) | undefined
}

const CHECK_OWNER_MS = 1000

/** The cause of a GW_ERR_PEER_LOST raised because no process received the request (it never ran anywhere). */
const UNDELIVERED = new Error('no gateway process received the request')

/** Whether a peer request failed because nobody received it: the target is gone and nothing of it ran. */
export function wasUndelivered (err: unknown): boolean {
  return err instanceof GatewayError && err.cause === UNDELIVERED
}

/** An error as it crosses between processes: a GatewayError keeps its code (so its HTTP status too). */
function packError (err: unknown): JsonObject {
  const wire = toWireError(err)
  return { ...wire, ...(err instanceof GatewayError && { gatewayCode: err.code }) } as unknown as JsonObject
}

function unpackError (packed: JsonObject): Error {
  const wire = packed as unknown as WireError
  const code = packed.gatewayCode
  if (typeof code === 'string' && Object.hasOwn(ERRORS, code)) {
    const error = new GatewayError(code as ErrorCode, [], wire.data === undefined ? {} : { data: wire.data })
    // Formatted by the process that raised it, from arguments only it had.
    error.message = wire.message
    return error
  }
  return new RpcError(wire.code, wire.message, wire.data)
}

/**
 * Requests between gateway processes over the store's signal bus: a process that receives something only
 * another process can act on (an answer to a request that process relayed, the retry of a call it holds)
 * sends it there and waits for the outcome. The sender stops waiting when its caller gives up (the target
 * is told to abort) or when the target's lease lapses (the target died).
 */
export class PeerRequests {
  readonly #processId: string
  readonly #bus: SignalBus
  readonly #leases: LeaseStore
  readonly #handlers = new Map<string, PeerHandler>()
  readonly #waiting = new Map<string, Waiting>()
  readonly #serving = new Map<string, AbortController>()
  /** What this process serves, by the process that asked: aborted when that process is gone. */
  readonly #servingFor = new Map<string, Set<AbortController>>()
  #senderCheck: NodeJS.Timeout | undefined
  readonly #unsubscribe: () => void
  /**
   * An event of a request served here (progress, a relayed message) that the bus would not take: the client of
   * the forwarding process misses it; the reply still goes.
   */
  readonly #eventLost = (err: unknown): void => { ignoreWithTrace(this.#log, 'an event of a forwarded request was not sent back to the process that forwarded it')(err) }

  readonly #log: Logger | undefined

  constructor (processId: string, bus: SignalBus, leases: LeaseStore, log?: Logger) {
    this.#log = log
    this.#processId = processId
    this.#bus = bus
    this.#leases = leases
    // The inbox of this process.
    this.#unsubscribe = subscribeTo(bus, BUS.peer, processId, (message) => { this.#receive(message) })
  }

  get processId (): string {
    return this.#processId
  }

  /** Registers what this process does with requests of `kind` (one handler per kind). */
  handle (kind: string, handler: PeerHandler): void {
    if (this.#handlers.has(kind)) throw new GatewayError('GW_ERR_INTERNAL', [`peer requests of kind '${kind}' already have a handler`])
    this.#handlers.set(kind, handler)
  }

  /**
   * Sends a request of `kind` to process `target`; resolves with its handler's result, rejects with its
   * error. The handler's events reach `onEvent`, in order and before the result.
   */
  async request (
    target: string,
    kind: string,
    payload: JsonObject,
    signal: AbortSignal,
    onEvent?: (event: JsonObject) => void,
  ): Promise<JsonObject> {
    if (signal.aborted) throw signal.reason
    const id = randomBytes(12).toString('base64url')
    const answered = new Promise<JsonObject>((resolve, reject) => this.#waiting.set(id, { resolve, reject, onEvent }))
    let watcher: NodeJS.Timeout | undefined
    const gone = new Promise<never>((_resolve, reject) => {
      const check = (): void => {
        this.#leases.alive(target, Date.now()).then((alive) => {
          if (alive) watcher = setTimeout(check, CHECK_OWNER_MS)
          else reject(new GatewayError('GW_ERR_PEER_LOST', [kind]))
        }, () => { watcher = setTimeout(check, CHECK_OWNER_MS) })
      }
      watcher = setTimeout(check, CHECK_OWNER_MS)
    })
    const onAbort = (): void => {
      void publishOn(this.#bus, BUS.peer, target, { type: 'abort', id })
      this.#waiting.get(id)?.reject(signal.reason)
    }
    signal.addEventListener('abort', onAbort, { once: true })
    try {
      const delivered = await publishOn(this.#bus, BUS.peer, target, { type: 'request', id, kind, from: this.#processId, payload })
      if (delivered === 0) throw new GatewayError('GW_ERR_PEER_LOST', [kind], { cause: UNDELIVERED })
      return await Promise.race([answered, gone])
    } finally {
      clearTimeout(watcher)
      signal.removeEventListener('abort', onAbort)
      this.#waiting.delete(id)
    }
  }

  close (): void {
    this.#unsubscribe()
    clearInterval(this.#senderCheck)
    for (const controller of this.#serving.values()) controller.abort(new GatewayError('GW_ERR_SHUTTING_DOWN'))
    for (const waiting of this.#waiting.values()) waiting.reject(new GatewayError('GW_ERR_SHUTTING_DOWN'))
  }

  #receive (message: PayloadOf<typeof BUS.peer>): void {
    const id = message.id
    if (message.type === 'abort') {
      this.#serving.get(id)?.abort(new GatewayError('GW_ERR_REQUEST_CANCELLED', ['the client stopped waiting']))
    } else if (message.type === 'event') {
      this.#waiting.get(id)?.onEvent?.(message.event)
    } else if (message.type === 'reply') {
      const waiting = this.#waiting.get(id)
      if (!waiting) return
      if (message.error !== undefined) {
        waiting.reject(unpackError(message.error))
      } else {
        waiting.resolve(message.result ?? {})
      }
    } else {
      void this.#serve(id, message.from, message.kind, message.payload)
    }
  }

  async #serve (id: string, from: string, kind: string, payload: JsonObject): Promise<void> {
    const handler = this.#handlers.get(kind)
    const controller = new AbortController()
    this.#serving.set(id, controller)
    this.#watchSender(from, controller)
    const emit = (event: JsonObject): void => {
      if (!controller.signal.aborted) publishOn(this.#bus, BUS.peer, from, { type: 'event', id, event }).catch(this.#eventLost)
    }
    let reply: PayloadOf<typeof BUS.peer>
    try {
      if (!handler) throw new GatewayError('GW_ERR_INTERNAL', [`no handler for peer requests of kind '${kind}'`])
      reply = { type: 'reply', id, result: await handler(payload, controller.signal, emit, from) }
    } catch (err) {
      reply = { type: 'reply', id, error: packError(err) }
    } finally {
      this.#serving.delete(id)
      this.#servingFor.get(from)?.delete(controller)
    }
    await publishOn(this.#bus, BUS.peer, from, reply)
  }

  /**
   * A request served for a process that dies would wait for ever (a listen stream, say): one check a second
   * over all senders aborts what was served for those whose lease lapsed.
   */
  #watchSender (from: string, controller: AbortController): void {
    const set = this.#servingFor.get(from) ?? new Set<AbortController>()
    this.#servingFor.set(from, set)
    set.add(controller)
    this.#senderCheck ??= setInterval(() => { void this.#checkSenders() }, CHECK_OWNER_MS).unref()
  }

  async #checkSenders (): Promise<void> {
    for (const [from, controllers] of this.#servingFor) {
      if (controllers.size === 0) {
        this.#servingFor.delete(from)
        continue
      }
      const alive = await this.#leases.alive(from, Date.now()).catch(() => true)
      if (alive) continue
      for (const controller of controllers) controller.abort(new GatewayError('GW_ERR_PEER_LOST', ['request']))
      this.#servingFor.delete(from)
    }
    if (this.#servingFor.size === 0) {
      clearInterval(this.#senderCheck)
      this.#senderCheck = undefined
    }
  }
}
