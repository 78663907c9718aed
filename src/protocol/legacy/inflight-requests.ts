import type { SignalBus } from '../../store/types.ts'
import type { RequestId } from '../../wire/jsonrpc.ts'
import { LazyAbort } from '../../wire/lazy-abort.ts'

/** Where a process asks the others to cancel a request it does not serve itself. */
const CANCEL_CHANNEL = 'legacy:cancel'

/**
 * Abort handles of the requests this process is serving, so `notifications/cancelled` reaches them
 * (whichever gateway process the notification was posted to) and shutdown can cancel whatever is
 * still running.
 */
export class InflightRequests {
  readonly #controllers = new Map<string, LazyAbort>()
  readonly #bus: SignalBus

  constructor (shutdown: AbortSignal, bus: SignalBus) {
    this.#bus = bus
    const unsubscribe = bus.subscribe(CANCEL_CHANNEL, ({ sessionId, requestId, reason }) => {
      if (typeof sessionId !== 'string' || typeof reason !== 'string') return
      if (typeof requestId === 'string' || typeof requestId === 'number') this.#abort(sessionId, requestId, reason)
    })
    shutdown.addEventListener('abort', () => {
      unsubscribe()
      for (const controller of this.#controllers.values()) controller.abort(shutdown.reason)
    }, { once: true })
  }

  static key (sessionId: string, requestId: RequestId): string {
    return `${sessionId}\u0000${typeof requestId}:${requestId}`
  }

  /** The request's abort (its signal is made when first read), and `done` to forget it once answered. */
  start (sessionId: string, requestId: RequestId): { abort: LazyAbort, done (): void } {
    const key = InflightRequests.key(sessionId, requestId)
    const controller = new LazyAbort()
    this.#controllers.set(key, controller)
    return {
      abort: controller,
      done: () => {
        if (this.#controllers.get(key) === controller) this.#controllers.delete(key)
      },
    }
  }

  /** Aborts the session's request here, or else asks every other gateway process to abort it. */
  async cancel (sessionId: string, requestId: RequestId, reason: string): Promise<void> {
    if (this.#abort(sessionId, requestId, reason)) return
    await this.#bus.publish(CANCEL_CHANNEL, { sessionId, requestId, reason })
  }

  get size (): number {
    return this.#controllers.size
  }

  #abort (sessionId: string, requestId: RequestId, reason: string): boolean {
    const controller = this.#controllers.get(InflightRequests.key(sessionId, requestId))
    if (!controller) return false
    controller.abort(new Error(reason))
    return true
  }
}
