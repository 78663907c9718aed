import type { Client, McpSubscription, SubscriptionFilter } from '@modelcontextprotocol/client'
import type { Logger } from '../observability/logger.ts'
import type { JsonObject } from '../wire/jsonrpc.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'

/** Times in a row a listen stream the upstream ended is opened again before the gateway gives up on it. */
const REOPEN_ATTEMPTS = 3
const REOPEN_DELAY_MS = 250
/** A stream that stayed open this long counts as healthy: its end starts a new run of attempts. */
const STABLE_MS = 10_000
/** Names the listen stream a notification came on: the upstream's own id, never relayed. */
const SUBSCRIPTION_ID_KEY = 'io.modelcontextprotocol/subscriptionId'

/** `params` of a notification from a listen stream without the upstream's subscription id. */
export function withoutSubscriptionId (params: JsonObject): JsonObject {
  const meta = params._meta as JsonObject | undefined
  if (meta === undefined || !(SUBSCRIPTION_ID_KEY in meta)) return params
  const { [SUBSCRIPTION_ID_KEY]: _id, ...rest } = meta
  const copy: JsonObject = { ...params }
  if (Object.keys(rest).length > 0) copy._meta = rest
  else delete copy._meta
  return copy
}

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

  /**
   * The stream of the list changes of a session's upstream, for the lists it says change (`listChanged`);
   * undefined when it names none, or refuses the stream (logged: the session works without it).
   */
  static async forListChanges (client: Client, timeout: number, log: Logger, session: string): Promise<ListenStream | undefined> {
    const capabilities = client.getServerCapabilities()
    const filter: SubscriptionFilter = {
      ...(capabilities?.tools?.listChanged === true && { toolsListChanged: true }),
      ...(capabilities?.prompts?.listChanged === true && { promptsListChanged: true }),
      ...(capabilities?.resources?.listChanged === true && { resourcesListChanged: true }),
    }
    if (Object.keys(filter).length === 0) return undefined
    try {
      return await ListenStream.open(client, filter, timeout, log)
    } catch (err) {
      // The whole error: an HTTP refusal keeps what the upstream wrote in its cause, which only the log shows.
      log.warn({ session, err }, 'upstream refused a subscriptions/listen stream for its list changes; they will not be seen on this session')
      return undefined
    }
  }

  /** What the upstream agreed to send on the stream. */
  get honored (): SubscriptionFilter {
    return this.#subscription.honoredFilter
  }

  async close (): Promise<void> {
    this.#closed = true
    clearTimeout(this.#reopen)
    await this.#subscription.close().catch(ignoreWithTrace(this.#log, 'an upstream listen stream did not close cleanly; its session closes it with its transport'))
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
            subscription.close().catch(ignoreWithTrace(this.#log, 'a listen stream reopened after its close did not close cleanly; its session closes it with its transport'))
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
