import pg from 'pg'
import type { Logger } from '../../observability/logger.ts'
import { ignoreWithTrace } from '../../observability/ignored.ts'

/** Longest pause between two attempts to connect again, so the bus is back soon after PostgreSQL is. */
const MAX_RECONNECT_DELAY_MS = 2000

export interface ListenerOptions {
  /** How to connect (the store's settings). */
  connection: pg.ClientConfig
  /** The PostgreSQL channel to LISTEN on. */
  channel: string
  /**
   * Run on every new connection once it listens, before it counts as up (the bus registers the process and
   * all it listens to there). A failure ends the connection and another is tried.
   */
  setup: (client: pg.Client) => Promise<void>
  /** The connection is up (after setup). */
  up: () => void
  /** Each notification's payload, in the order they came. */
  notified: (payload: string) => void
  /** Told once when the connection is lost and once when it is back. */
  log?: Logger | undefined
}

/**
 * The dedicated connection a bus LISTENs on: it stays up by itself. When it is lost (the server restarted, the
 * backend terminated, the network cut), a new one is opened with a growing pause between attempts (50 ms, doubled
 * each time, at most 2 s, with jitter) and set up again. One log line when it is lost, one when it is back.
 */
export class PgListener {
  readonly #options: ListenerOptions
  /** A connection given up (closed, lost, or failed to set up) that does not end cleanly is dropped either way. */
  readonly #unclean = (err: unknown): void => { ignoreWithTrace(this.#options.log, 'a PostgreSQL bus connection did not end cleanly; it is dropped either way')(err) }
  /** The connection, once it is set up; null while there is none. */
  #client: pg.Client | null = null
  /** The attempt to connect in progress. */
  #attempt: Promise<boolean> | null = null
  #failures = 0
  #timer: NodeJS.Timeout | undefined
  #lostAt: number | undefined
  #closed = false

  constructor (options: ListenerOptions) {
    this.#options = options
  }

  /** The connection, set up; null while it is lost or being set up. */
  get client (): pg.Client | null {
    return this.#client
  }

  /** Opens the first connection; rejects with PostgreSQL's error when it cannot be opened or set up. */
  async start (): Promise<void> {
    const error = await this.#connect()
    if (error !== undefined) throw error
  }

  /** Resolves when the attempt to connect in progress (if any) has ended, whether it succeeded or not. */
  async settled (): Promise<void> {
    if (this.#attempt !== null) await this.#attempt
  }

  /** Gives up on `client` (a statement on it failed): another connection is opened, as when it is lost. */
  drop (client: pg.Client, err: Error): void {
    this.#lost(client, err)
  }

  async close (): Promise<void> {
    this.#closed = true
    clearTimeout(this.#timer)
    await this.settled()
    const client = this.#client
    this.#client = null
    await client?.end().catch(this.#unclean)
  }

  /** One attempt: the error that ended it, or undefined when the connection is up. */
  async #connect (): Promise<Error | undefined> {
    let failure: Error | undefined
    const attempt = this.#open().then(() => true, (err: unknown) => {
      failure = err instanceof Error ? err : new Error(String(err))
      return false
    })
    this.#attempt = attempt
    await attempt
    this.#attempt = null
    return failure
  }

  async #open (): Promise<void> {
    const client = new pg.Client(this.#options.connection)
    let lost = false
    const onLost = (err?: Error): void => {
      if (lost) return
      lost = true
      this.#lost(client, err)
    }
    client.on('error', onLost)
    client.on('end', () => onLost())
    client.on('notification', (message) => {
      if (message.channel === this.#options.channel && message.payload !== undefined) this.#options.notified(message.payload)
    })
    try {
      await client.connect()
      await client.query(`LISTEN ${pg.escapeIdentifier(this.#options.channel)}`)
      await this.#options.setup(client)
    } catch (err) {
      lost = true
      await client.end().catch(this.#unclean)
      throw err
    }
    if (lost || this.#closed) {
      await client.end().catch(this.#unclean)
      throw new Error('the connection ended while it was set up')
    }
    this.#client = client
    this.#failures = 0
    if (this.#lostAt !== undefined) {
      this.#options.log?.info({ downMs: Date.now() - this.#lostAt }, 'PostgreSQL bus connection restored')
      this.#lostAt = undefined
    }
    this.#options.up()
  }

  /** The connection `client` was lost (an error, or it ended): another is opened unless the bus is closing. */
  #lost (client: pg.Client, err?: Error): void {
    if (this.#client !== client || this.#closed) return
    this.#client = null
    client.end().catch(this.#unclean)
    this.#lostAt = Date.now()
    this.#options.log?.warn({ err: err?.message ?? 'connection ended' }, 'PostgreSQL bus connection lost; signals between processes are not delivered until it is back')
    this.#retry()
  }

  #retry (): void {
    if (this.#closed) return
    const delay = Math.min(50 * 2 ** this.#failures, MAX_RECONNECT_DELAY_MS) + Math.floor(Math.random() * 100)
    this.#failures++
    this.#timer = setTimeout(() => {
      void this.#connect().then((error) => { if (error !== undefined) this.#retry() })
    }, delay)
    this.#timer.unref()
  }
}
