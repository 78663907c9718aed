import { GatewayError } from '../errors.ts'

/** What the pool reads of a session: whether anything holds it, since when it is unused, whether its client is gone. */
export interface PooledSession {
  /** Calls, tasks and subscriptions holding it open. */
  readonly holds: number
  /** When it was last used (epoch ms). */
  readonly lastUsedAt: number
  /** Its client is gone (a 2025-era session that ended or expired). */
  readonly ended: boolean
  readonly closed: boolean
}

/** The limits in force (read at every reservation, so that a reload's new values count at once). */
export interface PoolLimits {
  /** Sessions of the upstream at once, opening ones included (`maxSessions`). */
  readonly max: number
  /** Sessions one principal may hold at once (`maxSessionsPerPrincipal`, at most `max`). */
  readonly perPrincipal: number
  /** Unused for this long, a session counts as abandoned: it is the first to make room (`abandonedTimeout`). */
  readonly abandonedAfter: number
}

/** One counted session: reserved before it is opened, filled once it is, freed when it closes or fails to open. */
export interface Seat<S> {
  /** Who the session is counted against: the principal whose client it serves (or, shared, who opened it). */
  principal: string
  session: S | undefined
}

/**
 * The one accounting of an upstream's client sessions, in every sharing mode: per-client, shared and
 * per-call sessions alike take a seat from the moment they start opening until they close. A reservation
 * beyond a limit makes room by closing sessions nothing holds, in this order:
 *
 * 1. sessions whose client is gone;
 * 2. abandoned sessions (unused for `abandonedAfter`), idlest first;
 * 3. the idlest session of the principal holding the most seats (one over its share: its own idlest).
 *
 * When nothing can make room, the reservation is refused with a code that names the limit. A session that
 * calls, tasks or subscriptions hold is never closed to make room.
 */
export class SessionPool<S extends PooledSession> {
  readonly #name: string
  readonly #limits: () => PoolLimits
  readonly #evict: (session: S) => void
  readonly #now: () => number
  readonly #seats = new Set<Seat<S>>()
  readonly #bySession = new Map<S, Seat<S>>()
  readonly #counts = new Map<string, number>()

  /** `evict`: closes a session the pool took back (its seat is already free). */
  constructor (name: string, limits: () => PoolLimits, evict: (session: S) => void, now: () => number = Date.now) {
    this.#name = name
    this.#limits = limits
    this.#evict = evict
    this.#now = now
  }

  /** Seats taken: sessions open or opening. */
  get size (): number {
    return this.#seats.size
  }

  /** Seats `principal` holds. */
  heldBy (principal: string): number {
    return this.#counts.get(principal) ?? 0
  }

  /**
   * A seat for a new session of `principal`, making room if needed; throws GW_ERR_UPSTREAM_SESSION_SHARE
   * when the principal already holds its share and none of its sessions is idle, GW_ERR_UPSTREAM_SESSION_LIMIT
   * when the upstream holds `max` and none is idle.
   */
  reserve (principal: string): Seat<S> {
    this.#makeRoom(principal, undefined)
    const seat: Seat<S> = { principal, session: undefined }
    this.#seats.add(seat)
    this.#count(principal, 1)
    return seat
  }

  /** The seat's session is open. */
  fill (seat: Seat<S>, session: S): void {
    if (!this.#seats.has(seat)) return
    seat.session = session
    this.#bySession.set(session, seat)
  }

  /** The session (or the seat of one that failed to open) is gone; freeing twice is harmless. */
  free (target: Seat<S> | S): void {
    const seat = this.#bySession.get(target as S) ?? target as Seat<S>
    if (!this.#seats.delete(seat)) return
    if (seat.session !== undefined) this.#bySession.delete(seat.session)
    this.#count(seat.principal, -1)
  }

  /**
   * An idle session is taken up by `principal` (per-call sessions are reused by whoever needs their
   * capabilities): it is counted against that principal from now on, within its share.
   */
  transfer (session: S, principal: string): void {
    const seat = this.#bySession.get(session)
    if (seat === undefined || seat.principal === principal) return
    this.#makeRoom(principal, session, true)
    this.#count(seat.principal, -1)
    seat.principal = principal
    this.#count(principal, 1)
  }

  #makeRoom (principal: string, keep: S | undefined, shareOnly = false): void {
    const limits = this.#limits()
    // A share as large as the whole pool is no share: the pool's own limit answers.
    const share = Math.max(1, limits.perPrincipal)
    while (share < limits.max && this.heldBy(principal) >= share) {
      const own = this.#pick(limits, keep, principal)
      if (own === undefined) throw this.#refusal('GW_ERR_UPSTREAM_SESSION_SHARE', share, principal)
      this.#take(own)
    }
    if (shareOnly) return
    while (this.#seats.size >= limits.max) {
      const victim = this.#pick(limits, keep, undefined)
      if (victim === undefined) throw this.#refusal('GW_ERR_UPSTREAM_SESSION_LIMIT', limits.max, principal)
      this.#take(victim)
    }
  }

  /** The session to close next (see the class comment): of `principal` only, when given. */
  #pick (limits: PoolLimits, keep: S | undefined, principal: string | undefined): Seat<S> | undefined {
    const now = this.#now()
    let ended: Seat<S> | undefined
    let abandoned: Seat<S> | undefined
    let largest: Seat<S> | undefined
    for (const seat of this.#seats) {
      const session = seat.session
      if (session === undefined || session === keep || session.closed || session.holds > 0) continue
      if (principal !== undefined && seat.principal !== principal) continue
      if (session.ended) {
        ended ??= seat
      } else if (now - session.lastUsedAt >= limits.abandonedAfter) {
        if (abandoned === undefined || session.lastUsedAt < abandoned.session!.lastUsedAt) abandoned = seat
      } else if (largest === undefined || this.#before(seat, largest)) {
        largest = seat
      }
    }
    return ended ?? abandoned ?? largest
  }

  /** Whether `a` goes before `b`: its principal holds more seats, or as many and it is idler. */
  #before (a: Seat<S>, b: Seat<S>): boolean {
    const held = this.heldBy(a.principal) - this.heldBy(b.principal)
    return held > 0 || (held === 0 && a.session!.lastUsedAt < b.session!.lastUsedAt)
  }

  #take (seat: Seat<S>): void {
    const session = seat.session!
    this.free(seat)
    this.#evict(session)
  }

  #count (principal: string, by: number): void {
    const count = (this.#counts.get(principal) ?? 0) + by
    if (count <= 0) this.#counts.delete(principal)
    else this.#counts.set(principal, count)
  }

  #refusal (code: 'GW_ERR_UPSTREAM_SESSION_SHARE' | 'GW_ERR_UPSTREAM_SESSION_LIMIT', limit: number, principal: string): GatewayError {
    const option = code === 'GW_ERR_UPSTREAM_SESSION_SHARE' ? 'maxSessionsPerPrincipal' : 'maxSessions'
    const data = { code, upstream: this.#name, limit: option, max: limit, held: this.heldBy(principal) }
    return new GatewayError(code, [this.#name, limit], { data })
  }
}
