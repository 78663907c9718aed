import type { Logger } from '../observability/logger.ts'
import type { UpstreamPool } from '../upstream/upstream-pool.ts'

interface Entry {
  pool: UpstreamPool
  sessions: Set<string>
}

/**
 * Resource subscriptions of all sessions. The gateway subscribes upstream once per URI, on the owning
 * upstream's shared connection, and fans `notifications/resources/updated` out to every session that
 * subscribed. Subscriptions are renewed when an upstream reconnects.
 */
export class ResourceSubscriptions {
  readonly #byUri = new Map<string, Entry>()
  readonly #log: Logger

  constructor (log: Logger) {
    this.#log = log
  }

  async subscribe (sessionId: string, uri: string, pool: UpstreamPool, timeout: number): Promise<void> {
    const entry = this.#byUri.get(uri)
    if (entry) {
      entry.sessions.add(sessionId)
      return
    }
    await pool.shared().request('resources/subscribe', { uri }, { timeout })
    const fresh = this.#byUri.get(uri)
    if (fresh) fresh.sessions.add(sessionId)
    else this.#byUri.set(uri, { pool, sessions: new Set([sessionId]) })
  }

  async unsubscribe (sessionId: string, uri: string, timeout: number): Promise<void> {
    const entry = this.#byUri.get(uri)
    if (!entry?.sessions.delete(sessionId) || entry.sessions.size > 0) return
    this.#byUri.delete(uri)
    if (entry.pool.state !== 'ready') return
    await entry.pool.shared().request('resources/unsubscribe', { uri }, { timeout }).catch((err: unknown) => {
      this.#log.debug({ uri, upstream: entry.pool.name, err }, 'upstream unsubscribe failed')
    })
  }

  /** Sessions subscribed to `uri` on this upstream. */
  sessionsFor (pool: UpstreamPool, uri: string): string[] {
    const entry = this.#byUri.get(uri)
    return entry && entry.pool === pool ? [...entry.sessions] : []
  }

  async dropSession (sessionId: string, timeout: number): Promise<void> {
    const uris = [...this.#byUri].filter(([, entry]) => entry.sessions.has(sessionId)).map(([uri]) => uri)
    await Promise.all(uris.map((uri) => this.unsubscribe(sessionId, uri, timeout)))
  }

  /** Subscribes again upstream after a reconnect of `pool`. */
  async renew (pool: UpstreamPool): Promise<void> {
    for (const [uri, entry] of this.#byUri) {
      if (entry.pool !== pool) continue
      await pool.shared().request('resources/subscribe', { uri }, { timeout: pool.config.timeouts.request }).catch((err: unknown) => {
        this.#log.warn({ uri, upstream: pool.name, err }, 'could not renew resource subscription')
      })
    }
  }
}
