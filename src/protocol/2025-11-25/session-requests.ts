import { BUS, publishOn, subscribeTo } from '../../store/bus-channels.ts'
import type { SignalBus } from '../../store/types.ts'
import type { StreamHub } from '../../streams/stream-hub.ts'
import { ignoreWithTrace } from '../../observability/ignored.ts'
import type { Logger } from '../../observability/logger.ts'
import type { JsonObject, RequestId, RpcMessage } from '../../wire/jsonrpc.ts'

/**
 * Server→client requests for a session's GET stream (an upstream's request tied to no call) and what cancels
 * them. A request sent while the session holds no GET stream in any process waits here until one opens, then
 * goes out on it once; its cancellation before that only drops it (the client never saw it).
 */
export class SessionRequests {
  readonly #hub: StreamHub
  readonly #bus: SignalBus
  /** Per session, the requests no GET stream has carried yet, by id. */
  readonly #waiting = new Map<string, Map<RequestId, RpcMessage>>()

  constructor (hub: StreamHub, bus: SignalBus, log: Logger) {
    this.#hub = hub
    this.#bus = bus
    const lost = ignoreWithTrace(log, 'a request waiting for a GET stream was not passed to the process that opened one; the upstream request times out unanswered')
    // A GET stream of a session opened on the process whose delivery inbox is `from`.
    subscribeTo(bus, BUS.getStream, undefined, ({ sessionId, from }) => {
      const waiting = this.#waiting.get(sessionId)
      if (waiting === undefined) return
      this.#waiting.delete(sessionId)
      for (const message of waiting.values()) {
        publishOn(this.#bus, BUS.offer, from, { sessionId, message: message as unknown as JsonObject }).catch(lost)
      }
    })
  }

  /** Sends `message` (a request, or the cancellation of one) to the session's GET stream, now or once one opens. */
  async send (sessionId: string, message: RpcMessage): Promise<void> {
    const cancelled = 'method' in message && message.method === 'notifications/cancelled' ? message.params?.requestId as RequestId | undefined : undefined
    if (cancelled !== undefined && this.#forget(sessionId, cancelled)) return
    if (await this.#hub.publish(sessionId, message) > 0 || !('id' in message) || !('method' in message)) return
    const waiting = this.#waiting.get(sessionId) ?? new Map<RequestId, RpcMessage>()
    this.#waiting.set(sessionId, waiting.set(message.id, message))
  }

  /** How many requests wait for a GET stream. */
  get size (): number {
    let size = 0
    for (const waiting of this.#waiting.values()) size += waiting.size
    return size
  }

  #forget (sessionId: string, id: RequestId): boolean {
    const waiting = this.#waiting.get(sessionId)
    if (waiting?.delete(id) !== true) return false
    if (waiting.size === 0) this.#waiting.delete(sessionId)
    return true
  }
}
