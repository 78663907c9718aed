import { GatewayError } from '../errors.ts'
import { formatDuration } from '../config/units.ts'

interface Waiter {
  resolve (release: () => void): void
  reject (err: unknown): void
}

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
 */
export class CallSlots {
  readonly #upstream: string
  readonly #max: number
  readonly #maxQueued: number
  /** New calls, in order. */
  readonly #waiters: Waiter[] = []
  /** Calls that were answered by their client and resume: served before any new call, never refused. */
  readonly #resuming: Waiter[] = []
  #active = 0
  #parked = 0

  constructor (upstream: string, max: number, maxQueued: number) {
    this.#upstream = upstream
    this.#max = max
    this.#maxQueued = maxQueued
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

  /** The function that frees a slot taken at once, or undefined when the call would have to wait. */
  tryTake (): (() => void) | undefined {
    return this.#active < this.#max && this.waiting === 0 ? this.#grant() : undefined
  }

  /** Resolves with the function that frees the slot (idempotent) once the call may run. */
  take (request: SlotRequest = {}): Promise<() => void> {
    const { signal } = request
    if (signal?.aborted) return Promise.reject(signal.reason)
    if (this.#active < this.#max && this.waiting === 0) return Promise.resolve(this.#grant())
    if (this.#waiters.length >= this.#maxQueued) return Promise.reject(new GatewayError('GW_ERR_UPSTREAM_BUSY', [this.#upstream, this.#waiters.length]))
    return this.#enqueue(this.#waiters, request)
  }

  /**
   * Takes a slot for a call that gave its slot up (SlotClaim): ahead of every new call, whatever the queue
   * holds. `queued` is told when it has to wait.
   */
  retake (signal?: AbortSignal, queued?: () => void): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason)
    if (this.#active < this.#max && this.#resuming.length === 0) return Promise.resolve(this.#grant())
    queued?.()
    return this.#enqueue(this.#resuming, { signal })
  }

  /** A claim on a slot taken by `take` or `tryTake`, which its call may give up while it waits on its client. */
  claim (release: () => void): SlotClaim {
    return new SlotClaim(this, release)
  }

  /** Fails every waiting call (the upstream went down, or the gateway stops). */
  rejectAll (err: unknown): void {
    for (const waiter of [...this.#resuming.splice(0), ...this.#waiters.splice(0)]) waiter.reject(err)
  }

  /** @internal SlotClaim's count of the calls that gave their slot up. */
  countParked (delta: 1 | -1): void {
    this.#parked += delta
  }

  #enqueue (queue: Waiter[], request: SlotRequest): Promise<() => void> {
    const { signal, timeoutMs } = request
    return new Promise((resolve, reject) => {
      const leave = (err: unknown): void => {
        const index = queue.indexOf(waiter)
        if (index < 0) return
        queue.splice(index, 1)
        waiter.reject(err)
      }
      const onAbort = (): void => leave(signal!.reason)
      const timer = timeoutMs === undefined
        ? undefined
        : setTimeout(() => leave(new GatewayError('GW_ERR_UPSTREAM_SLOT_TIMEOUT', [this.#upstream, formatDuration(timeoutMs), this.#max])), timeoutMs)
      const settled = (): void => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', onAbort)
      }
      const waiter: Waiter = {
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

  #grant (): () => void {
    this.#active++
    let released = false
    return () => {
      if (released) return
      released = true
      this.#active--
      const next = this.#resuming.shift() ?? this.#waiters.shift()
      if (next) next.resolve(this.#grant())
    }
  }
}

/**
 * One call's hold on its upstream's call slots. While the call waits on its client (`park`, once per input
 * request relayed) it holds no slot; once nothing it asked is outstanding (`unpark`) it takes one again
 * (CallSlots.retake) before the answer goes upstream, so the upstream's further work is counted again.
 */
export class SlotClaim {
  readonly #slots: CallSlots
  #release: (() => void) | undefined
  /** Input requests relayed and not yet answered. */
  #asking = 0
  /** The slot was given up and is not back yet. */
  #away = false
  #retaking = false
  #ended = false

  constructor (slots: CallSlots, release: () => void) {
    this.#slots = slots
    this.#release = release
  }

  /** The call waits on its client for one more answer: the first such wait gives its slot to the next call. */
  park (): void {
    if (this.#ended || this.#asking++ > 0) return
    this.#giveUp()
  }

  /**
   * One answer arrived (or the question was given up). Once nothing is outstanding the call takes a slot again,
   * ahead of new calls; `queued` is told when it has to wait for one. A call whose `signal` aborted (it is
   * ending) takes none.
   */
  async unpark (signal: AbortSignal, queued?: () => void): Promise<void> {
    if (this.#ended || --this.#asking > 0 || !this.#away || this.#retaking || signal.aborted) return
    this.#retaking = true
    let release: () => void
    try {
      release = await this.#slots.retake(signal, queued)
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
