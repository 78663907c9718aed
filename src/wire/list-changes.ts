/** How long the list changes due to one stream are gathered into one notification. */
const WINDOW_MS = 50

const LIST_CHANGED = new Set(['notifications/tools/list_changed', 'notifications/prompts/list_changed', 'notifications/resources/list_changed'])

export function isListChanged (method: string): boolean {
  return LIST_CHANGED.has(method)
}

/**
 * Gathers list-change notifications: one upstream change can reach a client by several paths (its own
 * session, and the lists every new session starts from), and some servers announce one change per entry
 * in a burst. The first notification for a key starts a short window; the others within it are merged
 * into it, and it is sent when the window ends, so the client reads its lists after the last change.
 */
export class ListChangeCoalescer {
  readonly #pending = new Set<string>()

  schedule (key: string, send: () => void): void {
    if (this.#pending.has(key)) return
    this.#pending.add(key)
    setTimeout(() => {
      this.#pending.delete(key)
      send()
    }, WINDOW_MS).unref()
  }
}
