import type { ClientRef } from './client-ref.ts'
import type { SessionLease } from './upstream-events.ts'
import type { SessionPool } from './session-pool.ts'
import type { UpstreamSession } from './upstream-session.ts'

/**
 * The sessions of a `per-call` upstream: each call takes one for itself, an idle one with the client's
 * capabilities (and, with forwardAuthorization, opened with the caller's own header) or a new one, and
 * gives it back to the idle ones when it ends. Busy or idle, each holds a seat of the upstream's
 * SessionPool, counted against the principal whose call last took it; idle ones make room when needed.
 */
export class PerCallSessions {
  readonly #pool: SessionPool<UpstreamSession>
  readonly #idle: UpstreamSession[] = []

  constructor (pool: SessionPool<UpstreamSession>) {
    this.#pool = pool
  }

  /** The idle sessions, kept for reuse. */
  get idle (): readonly UpstreamSession[] {
    return this.#idle
  }

  /**
   * A session for one call of `client`; `open` opens a new one; `reusable` tells, when the call ends,
   * whether its session may serve another (else it is closed).
   */
  async lease (
    client: ClientRef,
    listKey: string,
    open: () => Promise<UpstreamSession>,
    reusable: () => boolean,
  ): Promise<SessionLease> {
    // The same list key: the same capabilities and, where the upstream tells callers apart, the same caller.
    const idle = this.#idle.find((s) => s.listKey === listKey && !s.closed)
    let session: UpstreamSession
    if (idle !== undefined) {
      this.#pool.transfer(idle, client.principal)
      this.forget(idle)
      session = idle
    } else {
      const seat = this.#pool.reserve(client.principal)
      try {
        session = await open()
      } catch (err) {
        this.#pool.free(seat)
        throw err
      }
      this.#pool.fill(seat, session)
      if (session.closed) this.#pool.free(session)
    }
    const unhold = session.hold()
    return {
      session,
      release: () => {
        unhold()
        if (!session.closed && reusable()) this.#idle.push(session)
        else void session.close()
      },
    }
  }

  /** The session is closed or closing: it is no longer offered. */
  forget (session: UpstreamSession): void {
    const index = this.#idle.indexOf(session)
    if (index >= 0) this.#idle.splice(index, 1)
  }

  /** Takes every idle session out, to close. */
  drain (): UpstreamSession[] {
    return this.#idle.splice(0)
  }
}
