import { GatewayError } from '../errors.ts'

interface Waiter {
  resolve (release: () => void): void
  reject (err: unknown): void
}

/**
 * The calls one upstream may run at once (`maxConcurrentCalls`), across all its sessions: the operator's
 * backpressure. Further calls wait in order, at most `maxQueuedCalls` of them; one more fails at once
 * with GW_ERR_UPSTREAM_BUSY.
 */
export class CallSlots {
  readonly #upstream: string
  readonly #max: number
  readonly #maxQueued: number
  readonly #waiters: Waiter[] = []
  #active = 0

  constructor (upstream: string, max: number, maxQueued: number) {
    this.#upstream = upstream
    this.#max = max
    this.#maxQueued = maxQueued
  }

  get active (): number {
    return this.#active
  }

  get waiting (): number {
    return this.#waiters.length
  }

  /** The function that frees a slot taken at once, or undefined when the call would have to wait. */
  tryTake (): (() => void) | undefined {
    return this.#active < this.#max && this.#waiters.length === 0 ? this.#grant() : undefined
  }

  /** Resolves with the function that frees the slot (idempotent) once the call may run. */
  take (signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason)
    if (this.#active < this.#max) return Promise.resolve(this.#grant())
    if (this.#waiters.length >= this.#maxQueued) return Promise.reject(new GatewayError('GW_ERR_UPSTREAM_BUSY', [this.#upstream, this.#waiters.length]))
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        const index = this.#waiters.indexOf(waiter)
        if (index < 0) return
        this.#waiters.splice(index, 1)
        reject(signal!.reason)
      }
      const waiter: Waiter = {
        resolve: (release) => {
          signal?.removeEventListener('abort', onAbort)
          resolve(release)
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort)
          reject(err)
        },
      }
      this.#waiters.push(waiter)
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  /** Fails every waiting call (the upstream went down, or the gateway stops). */
  rejectAll (err: unknown): void {
    for (const waiter of this.#waiters.splice(0)) waiter.reject(err)
  }

  #grant (): () => void {
    this.#active++
    let released = false
    return () => {
      if (released) return
      released = true
      this.#active--
      const next = this.#waiters.shift()
      if (next) next.resolve(this.#grant())
    }
  }
}
