import type { Client, McpSubscription, SubscriptionFilter } from '@modelcontextprotocol/client'
import type { Logger } from '../observability/logger.ts'

/** Times in a row a listen stream the upstream ended is opened again before the gateway gives up on it. */
const REOPEN_ATTEMPTS = 3
const REOPEN_DELAY_MS = 250
/** A stream that stayed open this long counts as healthy: its end starts a new run of attempts. */
const STABLE_MS = 10_000

/**
 * One `subscriptions/listen` stream of a 2026-07-28 upstream session. That protocol sends nothing
 * unsolicited: list changes and resource updates come only on such a stream, and the SDK hands what
 * arrives on it to the session's notification handlers, as it does with a 2025-era server's unsolicited
 * notifications. A stream the upstream ends (or drops) is opened again after a growing delay, a few times
 * in a row; `close()` ends it for good.
 */
export class ListenStream {
  readonly #client: Client
  readonly #filter: SubscriptionFilter
  readonly #timeout: number
  readonly #log: Logger
  #subscription: McpSubscription
  #closed = false
  #reopen: NodeJS.Timeout | undefined

  private constructor (client: Client, filter: SubscriptionFilter, timeout: number, log: Logger, subscription: McpSubscription) {
    this.#client = client
    this.#filter = filter
    this.#timeout = timeout
    this.#log = log
    this.#subscription = subscription
    this.#watch(0)
  }

  /** Opens a stream and waits for the upstream's acknowledgement; rejects when the upstream refuses it. */
  static async open (client: Client, filter: SubscriptionFilter, timeout: number, log: Logger): Promise<ListenStream> {
    return new ListenStream(client, filter, timeout, log, await client.listen(filter, { timeout }))
  }

  /** What the upstream agreed to send on the stream. */
  get honored (): SubscriptionFilter {
    return this.#subscription.honoredFilter
  }

  async close (): Promise<void> {
    this.#closed = true
    clearTimeout(this.#reopen)
    await this.#subscription.close().catch(() => {})
  }

  /** Opens the stream again when the upstream ends it (`attempt`: reopenings in a row so far). */
  #watch (attempt: number): void {
    const openedAt = Date.now()
    void this.#subscription.closed.then((cause) => {
      if (this.#closed || cause === 'local') return
      if (Date.now() - openedAt >= STABLE_MS) attempt = 0
      if (attempt >= REOPEN_ATTEMPTS) {
        this.#log.warn({ filter: this.#filter, cause }, 'upstream ended its subscriptions/listen stream again; not reopened')
        return
      }
      this.#reopen = setTimeout(() => {
        this.#client.listen(this.#filter, { timeout: this.#timeout }).then((subscription) => {
          if (this.#closed) {
            void subscription.close().catch(() => {})
            return
          }
          this.#subscription = subscription
          this.#watch(attempt + 1)
        }, (err: unknown) => {
          if (!this.#closed) this.#log.warn({ filter: this.#filter, err }, 'could not reopen an upstream subscriptions/listen stream')
        })
      }, REOPEN_DELAY_MS * 2 ** attempt)
      this.#reopen.unref()
    })
  }
}
