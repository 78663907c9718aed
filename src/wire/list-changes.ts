/** How long the list changes due to one stream are gathered into one notification. */
const WINDOW_MS = 50

const LIST_CHANGED = new Set(['notifications/tools/list_changed', 'notifications/prompts/list_changed', 'notifications/resources/list_changed'])

export function isListChanged (method: string): boolean {
  return LIST_CHANGED.has(method)
}

/**
 * The list-change notification a client's list request answers: after reading the list it knows of every
 * change before that. `resources/templates/list` counts for resources: there is no notification of its own
 * for templates, `notifications/resources/list_changed` announces both lists, and a client that only uses
 * templates re-reads only them, so without it such a client would never hear of a change again.
 */
const LISTED: Readonly<Record<string, string>> = {
  'tools/list': 'notifications/tools/list_changed',
  'prompts/list': 'notifications/prompts/list_changed',
  'resources/list': 'notifications/resources/list_changed',
  'resources/templates/list': 'notifications/resources/list_changed',
}

/** The list-change notification a list request (`tools/list`, …) answers, or undefined for other methods. */
export function listChangeAnsweredBy (method: string): string | undefined {
  return LISTED[method]
}

/** What became of one list change: it opened a window, joined an open one, or was held back (`untilListed`). */
export type ListChangeOutcome = 'window' | 'merged' | 'held'

/**
 * Gathers list-change notifications per owner (a client session, a listen stream) and kind (the
 * notification's method). One upstream change can reach a client by several paths (its own upstream
 * session, and the gateway's, whose lists every new session starts from), and some servers announce one
 * change per entry in a burst. The first notification starts a short window; the others within it are
 * merged into it, and it is sent when the window ends, so the client reads its lists after the last change.
 *
 * With `untilListed`, an owner that was sent a kind is sent no further one of that kind until it has read
 * that list again (`listed`): copies that arrive before then tell it nothing its next read will not show,
 * and this holds however far apart they arrive. An owner that has read the list hears of the next change.
 */
export class ListChangeCoalescer {
  readonly #untilListed: boolean
  /** Owner → kinds in an open window. */
  readonly #pending = new Map<string, Set<string>>()
  /** Owner → kinds sent that the owner has not listed since. */
  readonly #told = new Map<string, Set<string>>()

  constructor (options: { untilListed: boolean }) {
    this.#untilListed = options.untilListed
  }

  /**
   * A change of `kind` for `owner`. `send` delivers the notification when the window ends and says whether
   * it could (an owner with nowhere to deliver it to was not told, so the next change is not held back).
   */
  schedule (owner: string, kind: string, send: () => boolean): ListChangeOutcome {
    if (this.#told.get(owner)?.has(kind) === true) return 'held'
    const pending = this.#pending.get(owner) ?? new Set<string>()
    if (pending.has(kind)) return 'merged'
    pending.add(kind)
    this.#pending.set(owner, pending)
    setTimeout(() => {
      pending.delete(kind)
      if (pending.size === 0 && this.#pending.get(owner) === pending) this.#pending.delete(owner)
      if (send() && this.#untilListed) {
        const told = this.#told.get(owner) ?? new Set<string>()
        told.add(kind)
        this.#told.set(owner, told)
      }
    }, WINDOW_MS).unref()
    return 'window'
  }

  /** `owner` read the list that `kind` announces: its next change of that kind is sent. */
  listed (owner: string, kind: string): void {
    const told = this.#told.get(owner)
    if (told === undefined) return
    told.delete(kind)
    if (told.size === 0) this.#told.delete(owner)
  }

  /** Forgets what `owner` was told (it is gone, or its stream is: it may not have received it). */
  forget (owner: string): void {
    this.#told.delete(owner)
  }
}
