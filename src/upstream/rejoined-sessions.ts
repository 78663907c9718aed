import type { SessionLease } from './upstream-events.ts'
import type { SessionAddress, SessionOpenOptions, UpstreamSession } from './upstream-session.ts'
import { randomId } from '../wire/random-id.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'
import type { Logger } from '../observability/logger.ts'

/** Opens a session of the upstream under `key` for `principal`, joining an existing upstream session. */
type Opener = (key: string, rejoin: NonNullable<SessionOpenOptions['rejoin']>, principal: string) => Promise<UpstreamSession>

/**
 * The upstream sessions of one upstream that other gateway processes opened and this one uses again, for the
 * tasks it adopted from them (by Mcp-Session-Id). Each is used without a handshake, shared by the tasks adopted
 * from it, and left open upstream (no DELETE) when the last of them releases it: other processes may have
 * adopted tasks of the same session.
 */
export class RejoinedSessions {
  readonly #open: Opener
  readonly #sessions = new Map<string, Promise<UpstreamSession>>()

  constructor (open: Opener) {
    this.#open = open
  }

  get size (): number {
    return this.#sessions.size
  }

  /** `principal`: whom the adopted work is for (its requests carry that principal's credential, if any). */
  async lease (address: SessionAddress, principal = ''): Promise<SessionLease> {
    const key = `rejoin:${address.sessionId ?? ''}${principal === '' ? '' : `\u0000${principal}`}`
    let opening = this.#sessions.get(key)
    if (opening === undefined) {
      // Request ids of this process carry a prefix of their own: the first owner's ids may still be answered.
      opening = this.#open(key, { sessionId: address.sessionId, protocolVersion: address.protocolVersion, idPrefix: `gw-${randomId().slice(0, 12)}-` }, principal)
      this.#sessions.set(key, opening)
      const forget = (): void => { if (this.#sessions.get(key) === opening) this.#sessions.delete(key) }
      opening.then((session) => { if (session.closed) forget() }, forget)
    }
    const session = await opening
    const unhold = session.hold()
    return {
      session,
      release: () => {
        unhold()
        if (session.holds > 0) return
        if (this.#sessions.get(key) === opening) this.#sessions.delete(key)
        void session.detach()
      },
    }
  }

  /** Leaves every session (the upstream keeps them); one that failed to open is traced in `log` (lease() told its caller). */
  async detachAll (log: Logger): Promise<void> {
    const all = [...this.#sessions.values()]
    this.#sessions.clear()
    const failedOpen = ignoreWithTrace(log, 'a rejoined upstream session failed to open; the tasks that waited for it were told')
    await Promise.all(all.map(async (p) => await p.then(async (s) => { await s.detach() }, failedOpen)))
  }
}
