import { GatewayError } from '../errors.ts'
import { narrowed, type Access, type Caller } from './access.ts'

/** Ends one exchange: answers it with `err` where it can, closes its stream, cancels what it waits for. */
export type EndExchange = (err: GatewayError) => void

interface Held {
  readonly caller: Caller
  readonly end: EndExchange
  timer: NodeJS.Timeout | undefined
}

/** A timer waits at most this long (about 24.8 days); a later `exp` is reached in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1

const NOTHING = (): void => {}

/**
 * The long-lived exchanges of this process and the credential each was opened with: SSE streams (GET
 * streams and POST exchanges that became streams: a blocking `tasks/result`, a `subscriptions/listen`, a
 * call relaying input) and 2026-07-28 calls held between input rounds. Revocation bites at once: after a
 * configuration reload, every exchange whose credential no longer authenticates its principal, or whose
 * grants were narrowed, is ended (`revoke`); one opened with an OAuth access token is ended when the
 * token's `exp` passes. Without auth there is no credential and nothing is held.
 */
export class HeldExchanges {
  readonly #held = new Set<Held>()
  /** How the last reload that changed auth judges a credential; undefined before any. */
  #recheck: ((caller: Caller) => Access | undefined) | undefined

  /**
   * Registers an exchange of `caller`; returns what to call once the exchange has ended on its own. A caller
   * authenticated before a reload that revoked its credential, whose exchange became long-lived only after
   * it, is ended at once (`end` is called before this returns).
   */
  hold (caller: Caller, end: EndExchange): () => void {
    const credential = caller.credential
    if (credential === undefined) return NOTHING
    const held: Held = { caller, end, timer: undefined }
    this.#held.add(held)
    if (credential.expiresAt !== undefined) this.#expireAt(held, credential.expiresAt)
    const reason = this.#recheck === undefined ? undefined : this.#revoked(held.caller, this.#recheck)
    if (reason !== undefined) this.#end(held, new GatewayError('GW_ERR_AUTH_REVOKED', [reason]))
    return () => { this.#release(held) }
  }

  /**
   * Ends every exchange whose credential `recheck` no longer accepts (undefined), or accepts with grants
   * narrower than those the exchange was opened with (see `narrowed`); exchanges registered later are judged
   * the same way. Returns how many ended.
   */
  revoke (recheck: (caller: Caller) => Access | undefined): number {
    this.#recheck = recheck
    let ended = 0
    for (const held of [...this.#held]) {
      const reason = this.#revoked(held.caller, recheck)
      if (reason === undefined) continue
      this.#end(held, new GatewayError('GW_ERR_AUTH_REVOKED', [reason]))
      ended++
    }
    return ended
  }

  /** Why `caller` may no longer hold an exchange under `recheck`, or undefined when it may. */
  #revoked (caller: Caller, recheck: (caller: Caller) => Access | undefined): string | undefined {
    const access = recheck(caller)
    if (access === undefined) return 'a configuration reload removed or rotated it'
    return narrowed(caller.access, access) ? 'a configuration reload narrowed what it may use' : undefined
  }

  get size (): number {
    return this.#held.size
  }

  #expireAt (held: Held, at: number): void {
    const wait = Math.max(0, at - Date.now())
    held.timer = setTimeout(() => {
      if (wait > MAX_TIMER_MS) this.#expireAt(held, at)
      else this.#end(held, new GatewayError('GW_ERR_AUTH_EXPIRED'))
    }, Math.min(wait, MAX_TIMER_MS))
    held.timer.unref()
  }

  #end (held: Held, err: GatewayError): void {
    if (!this.#release(held)) return
    held.end(err)
  }

  #release (held: Held): boolean {
    clearTimeout(held.timer)
    return this.#held.delete(held)
  }
}
