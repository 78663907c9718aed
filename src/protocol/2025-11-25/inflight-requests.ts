import { BUS, publishOn, subscribeTo } from '../../store/bus-channels.ts'
import type { SignalBus } from '../../store/types.ts'
import type { RequestId } from '../../wire/jsonrpc.ts'
import { LazyAbort } from '../../wire/lazy-abort.ts'

type SessionRequests = Map<RequestId, InflightRequest>

/** One request in flight: its abort (its signal is made when first read); `done` forgets it once answered. */
export class InflightRequest extends LazyAbort {
  readonly #sessions: Map<string, SessionRequests>
  readonly #sessionId: string
  readonly #requests: SessionRequests
  readonly #requestId: RequestId

  constructor (sessions: Map<string, SessionRequests>, sessionId: string, requests: SessionRequests, requestId: RequestId) {
    super()
    this.#sessions = sessions
    this.#sessionId = sessionId
    this.#requests = requests
    this.#requestId = requestId
  }

  done (): void {
    if (this.#requests.get(this.#requestId) !== this) return
    this.#requests.delete(this.#requestId)
    if (this.#requests.size === 0 && this.#sessions.get(this.#sessionId) === this.#requests) this.#sessions.delete(this.#sessionId)
  }
}

/**
 * Abort handles of the requests this process is serving, so `notifications/cancelled` reaches them
 * (whichever gateway process the notification was posted to) and shutdown can cancel whatever is
 * still running. Kept per session, then per request id (as in any Map, 1 and '1' are different ids).
 */
export class InflightRequests {
  readonly #sessions = new Map<string, SessionRequests>()
  readonly #bus: SignalBus

  constructor (shutdown: AbortSignal, bus: SignalBus) {
    this.#bus = bus
    const unsubscribe = subscribeTo(bus, BUS.requestCancel, undefined, ({ sessionId, requestId, reason }) => {
      this.#abort(sessionId, requestId, reason)
    })
    shutdown.addEventListener('abort', () => {
      unsubscribe()
      for (const requests of this.#sessions.values()) for (const request of requests.values()) request.abort(shutdown.reason)
    }, { once: true })
  }

  /** Registers the session's request (one still registered under the same id is no longer reachable). */
  start (sessionId: string, requestId: RequestId): InflightRequest {
    let requests = this.#sessions.get(sessionId)
    if (requests === undefined) {
      requests = new Map()
      this.#sessions.set(sessionId, requests)
    }
    const request = new InflightRequest(this.#sessions, sessionId, requests, requestId)
    requests.set(requestId, request)
    return request
  }

  /** Aborts the session's request here, or else asks every other gateway process to abort it. */
  async cancel (sessionId: string, requestId: RequestId, reason: string): Promise<void> {
    if (this.#abort(sessionId, requestId, reason)) return
    await publishOn(this.#bus, BUS.requestCancel, undefined, { sessionId, requestId, reason })
  }

  get size (): number {
    let size = 0
    for (const requests of this.#sessions.values()) size += requests.size
    return size
  }

  #abort (sessionId: string, requestId: RequestId, reason: string): boolean {
    const request = this.#sessions.get(sessionId)?.get(requestId)
    if (request === undefined) return false
    request.abort(new Error(reason))
    return true
  }
}
