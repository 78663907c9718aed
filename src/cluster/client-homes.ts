import type { Logger } from '../observability/logger.ts'
import type { HomeStore } from '../store/types.ts'

export interface ClientHomesOptions {
  processId: string
  homes: HomeStore
  /** Whether other gateway processes share the store (else every client's home is this process). */
  shared: boolean
  /** How long a home lasts unless renewed. */
  ttlMs: number
  /** Whether this process holds upstream sessions of the client (then it keeps the home). */
  holdsSessions (clientKey: string): boolean
  log: Logger
}

/**
 * The home of each client: the gateway process that holds its upstream sessions and serves every request
 * that needs them. The first process a client's request reaches claims the home in the store; the others
 * send it their requests. A home lasts while its process holds sessions of the client (it renews it), and
 * passes to another process by compare-and-set when that process finds the home gone.
 */
export class ClientHomes {
  readonly #options: ClientHomesOptions
  /** Clients whose home this process is, with when it last served one of their requests. */
  readonly #mine = new Map<string, number>()
  readonly #timer: NodeJS.Timeout | undefined

  constructor (options: ClientHomesOptions) {
    this.#options = options
    if (options.shared) {
      this.#timer = setInterval(() => { void this.#renew() }, Math.max(1000, Math.floor(options.ttlMs / 3)))
      this.#timer.unref()
    }
  }

  get processId (): string {
    return this.#options.processId
  }

  /** The process that serves `clientKey`: this one (when it is, or becomes, the home) or another. */
  async resolve (clientKey: string): Promise<string> {
    const { processId, shared } = this.#options
    if (!shared) return processId
    if (this.#mine.has(clientKey)) {
      this.#mine.set(clientKey, Date.now())
      return processId
    }
    return this.#took(clientKey, await this.#options.homes.claim(clientKey, null, processId, this.#options.ttlMs))
  }

  /** The home `gone` did not receive a request: take its place (or learn who already did). */
  async replace (clientKey: string, gone: string): Promise<string> {
    return this.#took(clientKey, await this.#options.homes.claim(clientKey, gone, this.#options.processId, this.#options.ttlMs))
  }

  /** The client has no upstream session here any more: its next request may land its home anywhere. */
  async release (clientKey: string): Promise<void> {
    if (!this.#mine.delete(clientKey)) return
    await this.#options.homes.release(clientKey, this.#options.processId).catch(this.#lapses)
  }

  /** One of the client's upstream sessions here closed: once none is left, its home is given up (see release). */
  sessionClosed (clientKey: string): void {
    if (!this.#options.holdsSessions(clientKey)) void this.release(clientKey)
  }

  /** Gives up every home (this process stops). */
  async close (): Promise<void> {
    clearInterval(this.#timer)
    const clients = [...this.#mine.keys()]
    this.#mine.clear()
    await Promise.all(clients.map(async (client) => await this.#options.homes.release(client, this.#options.processId).catch(this.#lapses)))
  }

  /** A home the store would not give up lapses after its ttl: the client's next request then finds it gone. */
  readonly #lapses = (err: unknown): void => { this.#options.log.debug({ err }, 'could not give up a client home in the store; it lapses after its ttl') }

  #took (clientKey: string, home: string): string {
    if (home === this.#options.processId) this.#mine.set(clientKey, Date.now())
    return home
  }

  /**
   * Renews the homes of clients with sessions here or served lately; forgets the others (their entries
   * lapse in the store, and the next request of such a client may land its home anywhere).
   */
  async #renew (): Promise<void> {
    const { homes, processId, ttlMs, holdsSessions, log } = this.#options
    const now = Date.now()
    const held: string[] = []
    for (const [client, usedAt] of this.#mine) {
      if (holdsSessions(client) || now - usedAt < ttlMs / 3) held.push(client)
      else this.#mine.delete(client)
    }
    try {
      for (const lost of await homes.renew(processId, held, ttlMs)) {
        this.#mine.delete(lost)
        log.warn({ client: lost }, 'another gateway process took over the home of a client whose upstream sessions this process holds')
      }
    } catch (err) {
      log.debug({ err }, 'could not renew client homes')
    }
  }
}
