import { randomBytes } from 'node:crypto'
import { ERRORS, GatewayError, RpcError, toWireError, type ErrorCode, type WireError } from '../errors.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import type { LeaseStore, SignalBus } from '../store/types.ts'

/** Handles a request another gateway process sent to this one; its result (or error) goes back to the sender. */
export type PeerHandler = (payload: JsonObject, signal: AbortSignal) => Promise<JsonObject>

interface Waiting {
  resolve (result: JsonObject): void
  reject (err: unknown): void
}

const CHECK_OWNER_MS = 1000

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

function inbox (processId: string): string {
  return `peer:${processId}`
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
  readonly #unsubscribe: () => void

  constructor (processId: string, bus: SignalBus, leases: LeaseStore) {
    this.#processId = processId
    this.#bus = bus
    this.#leases = leases
    this.#unsubscribe = bus.subscribe(inbox(processId), (message) => { this.#receive(message) })
  }

  get processId (): string {
    return this.#processId
  }

  /** Registers what this process does with requests of `kind` (one handler per kind). */
  handle (kind: string, handler: PeerHandler): void {
    if (this.#handlers.has(kind)) throw new GatewayError('GW_ERR_INTERNAL', [`peer requests of kind '${kind}' already have a handler`])
    this.#handlers.set(kind, handler)
  }

  /** Sends a request of `kind` to process `target`; resolves with its handler's result, rejects with its error. */
  async request (target: string, kind: string, payload: JsonObject, signal: AbortSignal): Promise<JsonObject> {
    if (signal.aborted) throw signal.reason
    const id = randomBytes(12).toString('base64url')
    const answered = new Promise<JsonObject>((resolve, reject) => this.#waiting.set(id, { resolve, reject }))
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
      void this.#bus.publish(inbox(target), { type: 'abort', id })
      this.#waiting.get(id)?.reject(signal.reason)
    }
    signal.addEventListener('abort', onAbort, { once: true })
    try {
      const delivered = await this.#bus.publish(inbox(target), { type: 'request', id, kind, from: this.#processId, payload })
      if (delivered === 0) throw new GatewayError('GW_ERR_PEER_LOST', [kind])
      return await Promise.race([answered, gone])
    } finally {
      clearTimeout(watcher)
      signal.removeEventListener('abort', onAbort)
      this.#waiting.delete(id)
    }
  }

  close (): void {
    this.#unsubscribe()
    for (const controller of this.#serving.values()) controller.abort(new GatewayError('GW_ERR_SHUTTING_DOWN'))
    for (const waiting of this.#waiting.values()) waiting.reject(new GatewayError('GW_ERR_SHUTTING_DOWN'))
  }

  #receive (message: JsonObject): void {
    const id = typeof message.id === 'string' ? message.id : undefined
    if (id === undefined) return
    if (message.type === 'abort') {
      this.#serving.get(id)?.abort(new GatewayError('GW_ERR_REQUEST_CANCELLED', ['the client stopped waiting']))
    } else if (message.type === 'reply') {
      const waiting = this.#waiting.get(id)
      if (!waiting) return
      if (message.error !== undefined) {
        waiting.reject(unpackError(message.error as JsonObject))
      } else {
        waiting.resolve(message.result as JsonObject)
      }
    } else if (message.type === 'request' && typeof message.from === 'string' && typeof message.kind === 'string') {
      void this.#serve(id, message.from, message.kind, (message.payload ?? {}) as JsonObject)
    }
  }

  async #serve (id: string, from: string, kind: string, payload: JsonObject): Promise<void> {
    const handler = this.#handlers.get(kind)
    const controller = new AbortController()
    this.#serving.set(id, controller)
    let reply: JsonObject
    try {
      if (!handler) throw new GatewayError('GW_ERR_INTERNAL', [`no handler for peer requests of kind '${kind}'`])
      reply = { type: 'reply', id, result: await handler(payload, controller.signal) }
    } catch (err) {
      reply = { type: 'reply', id, error: packError(err) }
    } finally {
      this.#serving.delete(id)
    }
    await this.#bus.publish(inbox(from), reply)
  }
}
