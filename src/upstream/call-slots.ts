import { GatewayError } from '../errors.ts'
import { formatDuration } from '../config/units.ts'

interface Waiter {
  principal: string
  resolve (release: () => void): void
  reject (err: unknown): void
}

/** The bound that keeps a call waiting for a slot. */
export type SlotLimit = 'maxConcurrentCalls' | 'maxConcurrentCallsPerPrincipal'

/** How a call asks for a slot. */
export interface SlotRequest {
  /** Aborted when the call is no longer wanted: it leaves the queue. */
  signal?: AbortSignal | undefined
  /**
   * Longest wait in milliseconds (`slotWaitTimeout`, for a call a client waits on); then it fails with
   * GW_ERR_UPSTREAM_SLOT_TIMEOUT. Undefined: as long as it takes (a task's call).
   */
  timeoutMs?: number | undefined
}

/**
 * The calls one upstream may run at once (`maxConcurrentCalls`), across all its sessions: the operator's
 * backpressure. Further calls wait in order, at most `maxQueuedCalls` of them; one more fails at once
 * with GW_ERR_UPSTREAM_BUSY.
 *
 * A slot is the gateway's budget of upstream work, not the upstream request itself: a call that waits on its
 * client (an input request relayed and not yet answered) gives its slot up (SlotClaim) and takes one again
 * once the upstream works on, ahead of every new call, so a waiting client never blocks the others and a call
 * that was answered is never starved by new ones.
 *
 * Each principal holds at most `maxConcurrentCallsPerPrincipal` slots at once: a call of a principal that holds
 * its share waits while calls of others behind it in the queue get the free slots.
 */
export class CallSlots {
  readonly #upstream: string
  readonly #max: number
  readonly #maxQueued: number
  readonly #share: number
  /** New calls, in order. */
  readonly #waiters: Waiter[] = []
  /** Calls that were answered by their client and resume: served before any new call, never refused. */
  readonly #resuming: Waiter[] = []
  /** Slots held, per principal that holds any. */
  readonly #held = new Map<string, number>()
  #active = 0
  #parked = 0

  constructor (upstream: string, max: number, maxQueued: number, perPrincipal = max) {
    this.#upstream = upstream
    this.#max = max
    this.#maxQueued = maxQueued
    this.#share = Math.min(perPrincipal, max)
  }

  get active (): number {
    return this.#active
  }

  get waiting (): number {
    return this.#waiters.length + this.#resuming.length
  }

  /** Calls that gave their slot up while they wait on their client. */
  get parked (): number {
    return this.#parked
  }

  /**
   * The function that frees a slot taken at once, or undefined when the call would have to wait. (No waiting
   * call could have the slot instead: every free slot goes at once to the first waiting call that may take it.)
   */
  tryTake (principal: string): (() => void) | undefined {
    return this.#free(principal) ? this.#grant(principal) : undefined
  }

  /** Resolves with the function that frees the slot (idempotent) once the call may run. */
  take (principal: string, request: SlotRequest = {}): Promise<() => void> {
    const { signal } = request
    if (signal?.aborted) return Promise.reject(signal.reason)
    if (this.#free(principal)) return Promise.resolve(this.#grant(principal))
    if (this.#waiters.length >= this.#maxQueued) return Promise.reject(new GatewayError('GW_ERR_UPSTREAM_BUSY', [this.#upstream, this.#waiters.length]))
    return this.#enqueue(this.#waiters, principal, request)
  }

  /**
   * Takes a slot for a call that gave its slot up (SlotClaim): ahead of every new call, whatever the queue
   * holds, and within `request.timeoutMs` as a new call. `queued` is told when it has to wait.
   */
  retake (principal: string, request: SlotRequest = {}, queued?: () => void): Promise<() => void> {
    if (request.signal?.aborted) return Promise.reject(request.signal.reason)
    if (this.#free(principal)) return Promise.resolve(this.#grant(principal))
    queued?.()
    return this.#enqueue(this.#resuming, principal, request)
  }

  /** A claim on a slot `principal` took by `take` or `tryTake`, which its call may give up while it waits on its client. */
  claim (principal: string, release: () => void): SlotClaim {
    return new SlotClaim(this, principal, release)
  }

  /** Fails every waiting call (the upstream went down, or the gateway stops). */
  rejectAll (err: unknown): void {
    for (const waiter of [...this.#resuming.splice(0), ...this.#waiters.splice(0)]) waiter.reject(err)
  }

  /** @internal SlotClaim's count of the calls that gave their slot up. */
  countParked (delta: 1 | -1): void {
    this.#parked += delta
  }

  #free (principal: string): boolean {
    return this.#active < this.#max && (this.#held.get(principal) ?? 0) < this.#share
  }

  #enqueue (queue: Waiter[], principal: string, request: SlotRequest): Promise<() => void> {
    const { signal, timeoutMs } = request
    return new Promise((resolve, reject) => {
      const leave = (err: unknown): void => {
        const index = queue.indexOf(waiter)
        if (index < 0) return
        queue.splice(index, 1)
        waiter.reject(err)
      }
      const onAbort = (): void => leave(signal!.reason)
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => leave(this.#timedOut(principal, timeoutMs)), timeoutMs)
      const settled = (): void => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', onAbort)
      }
      const waiter: Waiter = {
        principal,
        resolve: (release) => {
          settled()
          resolve(release)
        },
        reject: (err) => {
          settled()
          reject(err)
        },
      }
      queue.push(waiter)
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  /** Why a call of `principal` would wait now: its principal holds its share, or else the upstream is full. */
  limitFor (principal: string): SlotLimit {
    return (this.#held.get(principal) ?? 0) >= this.#share && this.#active < this.#max ? 'maxConcurrentCallsPerPrincipal' : 'maxConcurrentCalls'
  }

  #timedOut (principal: string, timeoutMs: number): GatewayError {
    const why = this.limitFor(principal) === 'maxConcurrentCallsPerPrincipal'
      ? `its caller already held its share of ${this.#share} call slots (maxConcurrentCallsPerPrincipal)`
      : `its ${this.#max} call slots (maxConcurrentCalls) were all taken`
    return new GatewayError('GW_ERR_UPSTREAM_SLOT_TIMEOUT', [this.#upstream, formatDuration(timeoutMs), why])
  }

  #grant (principal: string): () => void {
    this.#active++
    this.#held.set(principal, (this.#held.get(principal) ?? 0) + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      this.#active--
      const left = this.#held.get(principal)! - 1
      if (left === 0) this.#held.delete(principal)
      else this.#held.set(principal, left)
      this.#dispatch()
    }
  }

  /** Gives free slots to the first waiting calls that may take them: answered calls first, then new ones in order. */
  #dispatch (): void {
    while (this.#active < this.#max) {
      const next = this.#firstAllowed(this.#resuming) ?? this.#firstAllowed(this.#waiters)
      if (next === undefined) return
      next.resolve(this.#grant(next.principal))
    }
  }

  #firstAllowed (queue: Waiter[]): Waiter | undefined {
    const index = queue.findIndex((waiter) => (this.#held.get(waiter.principal) ?? 0) < this.#share)
    return index < 0 ? undefined : queue.splice(index, 1)[0]
  }
}

/**
 * One call's hold on its upstream's call slots. While the call waits on its client (`park`, once per input
 * request relayed) it holds no slot; once nothing it asked is outstanding (`unpark`) it takes one again
 * (CallSlots.retake) before the answer goes upstream, so the upstream's further work is counted again.
 */
export class SlotClaim {
  readonly #slots: CallSlots
  readonly #principal: string
  #release: (() => void) | undefined
  /** Input requests relayed and not yet answered. */
  #asking = 0
  /** The slot was given up and is not back yet. */
  #away = false
  #retaking = false
  #ended = false

  constructor (slots: CallSlots, principal: string, release: () => void) {
    this.#slots = slots
    this.#principal = principal
    this.#release = release
  }

  /** The call waits on its client for one more answer: the first such wait gives its slot to the next call. */
  park (): void {
    if (this.#ended || this.#asking++ > 0) return
    this.#giveUp()
  }

  /**
   * One answer arrived (or the question was given up). Once nothing is outstanding the call takes a slot again,
   * ahead of new calls, waiting at most `timeoutMs` (then GW_ERR_UPSTREAM_SLOT_TIMEOUT); `queued` is told when it
   * has to wait for one. A call whose `signal` aborted (it is ending) takes none.
   */
  async unpark (signal: AbortSignal, queued?: () => void, timeoutMs?: number): Promise<void> {
    if (this.#ended || --this.#asking > 0 || !this.#away || this.#retaking || signal.aborted) return
    this.#retaking = true
    let release: () => void
    try {
      release = await this.#slots.retake(this.#principal, { signal, timeoutMs }, queued)
    } finally {
      this.#retaking = false
    }
    if (this.#ended) {
      release()
      return
    }
    this.#away = false
    this.#slots.countParked(-1)
    this.#release = release
    // It asked again while it waited for the slot.
    if (this.#asking > 0) this.#giveUp()
  }

  /** The call ended: its slot, if it holds one, goes to the next call. */
  release (): void {
    if (this.#ended) return
    this.#ended = true
    if (this.#away) this.#slots.countParked(-1)
    this.#away = false
    const release = this.#release
    this.#release = undefined
    release?.()
  }

  #giveUp (): void {
    const release = this.#release
    if (release === undefined) return
    this.#release = undefined
    this.#away = true
    this.#slots.countParked(1)
    release()
  }
}
