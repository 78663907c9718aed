import type { SessionPool } from './session-pool.ts'
import type { UpstreamSession } from './upstream-session.ts'

/**
 * The per-client and shared sessions of one upstream, by slot key: the client's key (per-client) or its
 * capabilities (shared), and with forwardAuthorization the tag of the credential the session was opened
 * with (`<key>\u0000<tag>`), so that a session serves callers with that credential only. Each takes a seat
 * of the upstream's SessionPool from the moment it starts opening until it closes.
 */
export class ClientSessions {
  readonly #pool: SessionPool<UpstreamSession>
  readonly #opening = new Map<string, Promise<UpstreamSession>>()
  readonly #open = new Map<string, UpstreamSession>()
  readonly #slotOf = new WeakMap<UpstreamSession, string>()
  /** Slot keys whose client ended while their session was being opened. */
  readonly #endedWhileOpening = new Set<string>()

  constructor (pool: SessionPool<UpstreamSession>) {
    this.#pool = pool
  }

  /** The open session under `key`, if any. */
  get (key: string): UpstreamSession | undefined {
    const session = this.#open.get(key)
    return session?.closed === false ? session : undefined
  }

  /**
   * The session under `key`, being opened or open; opened by `start` when there is none, in a seat reserved
   * for `principal` (which throws when the pool has no room).
   */
  obtain (key: string, principal: string, start: () => Promise<UpstreamSession>): Promise<UpstreamSession> {
    const known = this.#opening.get(key)
    if (known !== undefined) return known
    const seat = this.#pool.reserve(principal)
    const opening = start()
    this.#opening.set(key, opening)
    opening.then((session) => {
      this.#slotOf.set(session, key)
      this.#pool.fill(seat, session)
      if (this.#endedWhileOpening.delete(key)) session.ended = true
      if (this.#opening.get(key) === opening) this.#open.set(key, session)
      else void session.close()
    }, () => {
      this.#pool.free(seat)
      this.#endedWhileOpening.delete(key)
      if (this.#opening.get(key) === opening) this.#opening.delete(key)
    })
    return opening
  }

  /** The open sessions of the client `clientKey` names (with forwardAuthorization, one per credential). */
  * ofClient (clientKey: string): Generator<UpstreamSession> {
    for (const [key, session] of this.#open) if (!session.closed && belongs(key, clientKey)) yield session
  }

  /** The client is gone: its sessions are marked ended (also one still being opened); returns the open ones. */
  endClient (clientKey: string): UpstreamSession[] {
    for (const key of this.#opening.keys()) {
      if (!this.#open.has(key) && belongs(key, clientKey)) this.#endedWhileOpening.add(key)
    }
    const sessions = [...this.ofClient(clientKey)]
    for (const session of sessions) session.ended = true
    return sessions
  }

  /** Forgets a session that closes or is closed; true when it was the one registered under its key. */
  remove (session: UpstreamSession): boolean {
    this.#pool.free(session)
    const key = this.#slotOf.get(session)
    if (key === undefined || this.#open.get(key) !== session) return false
    this.#open.delete(key)
    this.#opening.delete(key)
    return true
  }

  values (): IterableIterator<UpstreamSession> {
    return this.#open.values()
  }

  /** Forgets every session; returns those being opened or open, to close. */
  clear (): Array<Promise<UpstreamSession>> {
    const all = [...this.#opening.values()]
    this.#opening.clear()
    this.#open.clear()
    this.#endedWhileOpening.clear()
    return all
  }
}

function belongs (slotKey: string, clientKey: string): boolean {
  return slotKey === clientKey || (slotKey.startsWith(clientKey) && slotKey[clientKey.length] === '\u0000')
}
