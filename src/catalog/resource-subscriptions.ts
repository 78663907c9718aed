import { requestUpstream, type UpstreamRequest } from '../upstream/upstream-request.ts'
import type { Logger } from '../observability/logger.ts'
import type { JsonObject, RpcNotification } from '../wire/jsonrpc.ts'
import type { ClientRef } from '../upstream/client-ref.ts'
import { type Upstream } from '../upstream/upstream.ts'
import { GATEWAY_CLIENT, GATEWAY_KEY } from '../upstream/client-ref.ts'
import type { UpstreamSession } from '../upstream/upstream-session.ts'

/** One URI subscribed upstream on one session, for one or more subscribers. */
interface Entry {
  upstream: Upstream
  /** Releases the session the subscription holds. */
  release: () => void
  uri: string
  subscribers: Set<string>
  /** Ends the subscription upstream (see UpstreamSession.subscribeResource). */
  end: (timeout: number) => Promise<void>
}

/** Sends a resource update to a subscriber: a 2025-era session id, or a `listen:` stream id. */
export type DeliverUpdate = (subscriber: string, message: RpcNotification) => void

const UNSUBSCRIBE_TIMEOUT_MS = 10_000

/**
 * Resource subscriptions. A subscription is made on the subscriber's client's upstream session (for
 * `per-call` upstreams on the gateway's own session), once per URI and session however many subscribers
 * share it, and holds that session open; `notifications/resources/updated` from the session goes to its
 * subscribers of that URI. Subscriptions on the gateway's own session are renewed when the upstream
 * reconnects; those on a client's session end with it.
 */
export class ResourceSubscriptions {
  readonly #bySession = new Map<UpstreamSession, Map<string, Entry>>()
  /** Upstream subscriptions being made, by session and URI. */
  readonly #opening = new Map<UpstreamSession, Map<string, Promise<Entry['end']>>>()
  /** Subscriptions of a gateway session that closed, to take up again on the next one. */
  readonly #detached = new Map<Upstream, Entry[]>()
  readonly #log: Logger
  readonly #deliver: DeliverUpdate

  constructor (log: Logger, deliver: DeliverUpdate) {
    this.#log = log
    this.#deliver = deliver
  }

  async subscribe (subscriber: string, uri: string, upstream: Upstream, client: ClientRef, authorization?: string): Promise<void> {
    const plan = { method: 'resources/subscribe', client, purpose: 'read', authorization } as const
    const joined = await requestUpstream(upstream, plan, async (request) => await this.#join(request, subscriber, uri, upstream))
    // The subscription it waited for ended before it could join (its last subscriber left): make its own.
    if (!joined) await this.subscribe(subscriber, uri, upstream, client, authorization)
  }

  /**
   * Joins the subscription of `uri` on the request's session, made upstream first unless it exists or is being
   * made; a new subscription keeps the session held. False when the one it waited for ended before it could join.
   */
  async #join (request: UpstreamRequest, subscriber: string, uri: string, upstream: Upstream): Promise<boolean> {
    const session = request.session
    // One upstream subscription per URI and session: a subscriber that comes while it is being made waits for it.
    const opening = this.#opening.get(session)?.get(uri)
    let end: Entry['end'] | undefined
    if (opening === undefined && !this.#bySession.get(session)?.has(uri)) {
      const made = session.subscribeResource(uri, request.timeout)
      const byUri = this.#opening.get(session) ?? new Map<string, Promise<Entry['end']>>()
      this.#opening.set(session, byUri.set(uri, made))
      try {
        end = await made
      } finally {
        byUri.delete(uri)
        if (byUri.size === 0) this.#opening.delete(session)
      }
    } else {
      await opening
    }
    const entries = this.#bySession.get(session) ?? new Map<string, Entry>()
    this.#bySession.set(session, entries)
    const existing = entries.get(uri)
    if (existing) {
      existing.subscribers.add(subscriber)
      return true
    }
    if (end === undefined) return false
    entries.set(uri, { upstream, release: request.keep(), uri, subscribers: new Set([subscriber]), end })
    return true
  }

  async unsubscribe (subscriber: string, uri: string): Promise<void> {
    const emptied: Entry[] = []
    for (const [session, entries] of this.#bySession) {
      const entry = entries.get(uri)
      if (!entry?.subscribers.delete(subscriber) || entry.subscribers.size > 0) continue
      entries.delete(uri)
      if (entries.size === 0) this.#bySession.delete(session)
      emptied.push(entry)
    }
    await Promise.all(emptied.map(async (entry) => await this.#unsubscribeUpstream(entry)))
  }

  /** Ends every subscription of a subscriber (its session ended, its listen stream closed). */
  async dropSubscriber (subscriber: string): Promise<void> {
    const uris = new Set<string>()
    for (const entries of this.#bySession.values()) {
      for (const entry of entries.values()) if (entry.subscribers.has(subscriber)) uris.add(entry.uri)
    }
    await Promise.all([...uris].map(async (uri) => await this.unsubscribe(subscriber, uri)))
  }

  /** An update the upstream sent on `session`: to that session's subscribers of the URI. */
  updated (session: UpstreamSession, params: JsonObject): void {
    const uri = typeof params.uri === 'string' ? params.uri : undefined
    const entry = uri === undefined ? undefined : this.#bySession.get(session)?.get(uri)
    if (!entry) return
    for (const subscriber of entry.subscribers) this.#deliver(subscriber, { jsonrpc: '2.0', method: 'notifications/resources/updated', params })
  }

  /** A session closed: its subscriptions end, except the gateway session's, which `renew` takes up again. */
  sessionClosed (upstream: Upstream, session: UpstreamSession): void {
    const entries = this.#bySession.get(session)
    if (!entries) return
    this.#bySession.delete(session)
    for (const entry of entries.values()) entry.release()
    if (session.key === GATEWAY_KEY) {
      this.#detached.set(upstream, [...entries.values()])
    } else if (!session.ended) {
      this.#log.info({ upstream: upstream.name, session: session.key, uris: [...entries.keys()] }, 'resource subscriptions ended with their upstream session')
    }
  }

  /** Subscribes again on the upstream's new gateway session (after a reconnect). */
  async renew (upstream: Upstream): Promise<void> {
    const entries = this.#detached.get(upstream) ?? []
    this.#detached.delete(upstream)
    for (const entry of entries) {
      await Promise.all([...entry.subscribers].map(async (subscriber) => {
        await this.subscribe(subscriber, entry.uri, upstream, GATEWAY_CLIENT)
      })).catch((err: unknown) => {
        this.#log.warn({ uri: entry.uri, upstream: upstream.name, err }, 'could not renew resource subscription')
      })
    }
  }

  async #unsubscribeUpstream (entry: Entry): Promise<void> {
    try {
      await entry.end(UNSUBSCRIBE_TIMEOUT_MS)
    } catch (err) {
      this.#log.debug({ uri: entry.uri, upstream: entry.upstream.name, err }, 'upstream unsubscribe failed')
    } finally {
      entry.release()
    }
  }
}
