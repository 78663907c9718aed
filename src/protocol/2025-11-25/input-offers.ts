import { BUS, publishOn, subscribeTo } from '../../store/bus-channels.ts'
import { ignoreWithTrace } from '../../observability/ignored.ts'
import type { Logger } from '../../observability/logger.ts'
import type { SignalBus } from '../../store/types.ts'

interface Held {
  /** The streams of this process the input is offered on, each by its release function. */
  holders: Set<() => boolean>
  unsubscribe (): void
}

/**
 * Which queued inputs are offered on a stream still open, across every gateway process sharing the bus.
 *
 * A process that writes an input request on a stream (a `tasks/result` stream, a GET stream) holds the input
 * until that stream is gone or the input is settled: it listens on the input's `offered` channel. Whether an
 * input is offered somewhere is then a publish on that channel: the number of processes that heard it (as
 * the `task-stream` probe tells whether a `tasks/result` stream is held). Nothing is stored: a process that
 * dies takes its streams and their holds with it, which is exactly when its offers are gone.
 */
export class InputOffers {
  readonly #bus: SignalBus
  readonly #held = new Map<string, Held>()

  readonly #log: Logger

  constructor (bus: SignalBus, log: Logger) {
    this.#bus = bus
    this.#log = log
  }

  /**
   * Holds input `key` as offered on one stream of this process. The returned function lets it go (the stream
   * is gone): true when it was still held, false when it was settled meanwhile (or let go already).
   */
  hold (key: string): () => boolean {
    let held = this.#held.get(key)
    if (held === undefined) {
      const entry: Held = {
        holders: new Set(),
        unsubscribe: subscribeTo(this.#bus, BUS.offered, key, (payload) => {
          if ('settled' in payload) this.#drop(key, entry)
        }),
      }
      held = entry
      this.#held.set(key, held)
    }
    const entry = held
    const release = (): boolean => {
      if (!entry.holders.delete(release)) return false
      if (entry.holders.size === 0) this.#drop(key, entry)
      return true
    }
    entry.holders.add(release)
    return release
  }

  /** Whether input `key` is offered on a stream still open, in this process or another. */
  async offered (key: string): Promise<boolean> {
    return await publishOn(this.#bus, BUS.offered, key, { probe: true }) > 0
  }

  /** Input `key` was answered or expired: every process lets it go. */
  settled (key: string): void {
    publishOn(this.#bus, BUS.offered, key, { settled: true }).catch(ignoreWithTrace(this.#log, 'other processes were not told an input settled; they let it go when their stream ends', { key }))
  }

  /** How many inputs this process holds as offered. */
  get size (): number {
    return this.#held.size
  }

  #drop (key: string, entry: Held): void {
    entry.holders.clear()
    entry.unsubscribe()
    if (this.#held.get(key) === entry) this.#held.delete(key)
  }
}
