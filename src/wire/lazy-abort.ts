/**
 * An abort whose AbortController is made only when someone asks for its signal. A request that needs no
 * signal (most: `tasks/get`, `ping`, lists) then costs no controller, which is a noticeable share of what
 * such a request costs. Aborting before the signal was asked for is remembered: the signal is born aborted.
 */
export class LazyAbort {
  #controller: AbortController | undefined
  #aborted = false
  #reason: unknown

  get aborted (): boolean {
    return this.#aborted
  }

  get reason (): unknown {
    return this.#reason
  }

  get signal (): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController()
      if (this.#aborted) this.#controller.abort(this.#reason)
    }
    return this.#controller.signal
  }

  abort (reason: unknown): void {
    if (this.#aborted) return
    this.#aborted = true
    this.#reason = reason
    this.#controller?.abort(reason)
  }
}
