import type { RequestId } from '../jsonrpc.ts'

/**
 * Abort handles of the requests this process is serving, so `notifications/cancelled` reaches them
 * and shutdown can cancel whatever is still running.
 */
export class InflightRequests {
  readonly #controllers = new Map<string, AbortController>()

  constructor (shutdown: AbortSignal) {
    shutdown.addEventListener('abort', () => {
      for (const controller of this.#controllers.values()) controller.abort(shutdown.reason)
    }, { once: true })
  }

  static key (sessionId: string, requestId: RequestId): string {
    return `${sessionId}\u0000${typeof requestId}:${requestId}`
  }

  start (sessionId: string, requestId: RequestId): { signal: AbortSignal, done (): void } {
    const key = InflightRequests.key(sessionId, requestId)
    const controller = new AbortController()
    this.#controllers.set(key, controller)
    return {
      signal: controller.signal,
      done: () => {
        if (this.#controllers.get(key) === controller) this.#controllers.delete(key)
      },
    }
  }

  cancel (sessionId: string, requestId: RequestId, reason: string): boolean {
    const controller = this.#controllers.get(InflightRequests.key(sessionId, requestId))
    if (!controller) return false
    controller.abort(new Error(reason))
    return true
  }

  get size (): number {
    return this.#controllers.size
  }
}
