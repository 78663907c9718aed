import type pg from 'pg'
import { GatewayError } from '../../errors.ts'
import type { Logger } from '../../observability/logger.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import type { BusHandler, SignalBus } from '../types.ts'
import { busStatements, encodeMessage, listenChannel, MAX_NOTIFY_BYTES, type BusStatements } from './postgres-bus-sql.ts'
import { BusInbox } from './postgres-bus-inbox.ts'
import { PgListener } from './postgres-listener.ts'
import { ignoreWithTrace } from '../../observability/ignored.ts'

export { busTables } from './postgres-bus-sql.ts'

/** Channels per statement when the listener table is written (one channel per running task: thousands). */
const CHANGE_BATCH = 1000
/**
 * How often processes that are gone and stored messages nobody read are deleted (also at every connection). The
 * sweep is also the LISTEN connection's check: one that fails or gets no answer is given up for a new one.
 */
const SWEEP_INTERVAL_MS = 60_000
/**
 * Longest wait for a connection or a statement on the LISTEN connection, unless the store's settings say: a
 * connection that stops answering (a network that lost it) is then given up instead of waited on for ever.
 */
const TIMEOUT_MS = 15_000

export interface PostgresBusOptions {
  /** For publishing. */
  pool: pg.Pool
  /** The settings of its dedicated LISTEN connection (the same as the pool's). */
  connection: pg.ClientConfig
  /** The store's schema: the bus's tables live there (busTables); its channels are namespaced by it. */
  schema: string
  /** Unique per store instance. */
  processId: string
  log?: Logger
}

/**
 * Signals between gateway processes over PostgreSQL LISTEN/NOTIFY. Each process LISTENs on one PostgreSQL
 * channel of its own, on a dedicated connection, and writes the bus channels it has handlers for to a table; a
 * publish is one statement that notifies every process listening on the bus channel whose LISTEN connection is
 * alive, and counts them. A message too long for a notification is stored, and the notification carries its id.
 *
 * Signals are at most once, as on Redis: a publish while PostgreSQL is unreachable resolves 0, and what is
 * published while a process's LISTEN connection is lost does not reach it. The connection is opened again by
 * itself, and every subscription is registered again on it.
 */
export class PostgresBus implements SignalBus {
  readonly #pool: pg.Pool
  readonly #processId: string
  readonly #sql: BusStatements
  readonly #listener: PgListener
  readonly #log: Logger | undefined
  /** The PostgreSQL channel this process LISTENs on. */
  readonly #channel: string
  readonly #handlers = new Map<string, Set<BusHandler>>()
  /** The channels in the listener table, as far as this process knows. */
  #stored = new Set<string>()
  /** Channels whose handlers came or went since the table was last written. */
  readonly #dirty = new Set<string>()
  /** The round writing what was in #dirty when it began to the table, while it runs. */
  #round: Promise<void> | null = null
  /** The last publish on each channel still in progress: the next one waits for it (order per channel). */
  readonly #tails = new Map<string, Promise<unknown>>()
  readonly #inbox: BusInbox
  #sweeper: NodeJS.Timeout | undefined
  #closed = false

  constructor (options: PostgresBusOptions) {
    this.#pool = options.pool
    this.#processId = options.processId
    this.#log = options.log
    this.#sql = busStatements(options.schema)
    this.#channel = listenChannel(options.schema, options.processId)
    this.#inbox = new BusInbox({
      client: () => this.#listener.client,
      sql: this.#sql,
      handlers: (channel) => this.#handlers.get(channel),
      log: options.log,
    })
    this.#listener = new PgListener({
      connection: {
        ...options.connection,
        connectionTimeoutMillis: options.connection.connectionTimeoutMillis ?? TIMEOUT_MS,
        query_timeout: options.connection.query_timeout ?? TIMEOUT_MS,
      },
      channel: this.#channel,
      setup: async (client) => await this.#register(client),
      up: () => { this.#write() },
      notified: (payload) => this.#inbox.received(payload),
      log: options.log,
    })
  }

  /** Opens the LISTEN connection and registers what was subscribed before; fails with GW_ERR_STORE_UNAVAILABLE. */
  async start (): Promise<void> {
    try {
      await this.#listener.start()
    } catch (err) {
      throw new GatewayError('GW_ERR_STORE_UNAVAILABLE', [`the bus could not listen on PostgreSQL (${(err as Error).message})`], { cause: err })
    }
    this.#sweeper = setInterval(() => { void this.#check() }, SWEEP_INTERVAL_MS)
    this.#sweeper.unref()
  }

  /** Stops listening and deletes what this process listened to; publishes resolve 0 afterwards. */
  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#sweeper)
    await this.#listener.settled()
    const client = this.#listener.client
    await this.#round
    await client?.query(this.#sql.leave, [this.#processId]).catch(ignoreWithTrace(this.#log, 'this process\'s bus rows were not deleted at close; the sweep of the other processes deletes them'))
    await this.#listener.close()
  }

  async publish (channel: string, message: JsonObject): Promise<number> {
    if (this.#closed) return 0
    const text = encodeMessage(channel, JSON.stringify(message))
    const before = this.#tails.get(channel)
    const sending = before === undefined ? this.#send(channel, text) : before.then(async () => await this.#send(channel, text))
    this.#tails.set(channel, sending)
    void sending.then(() => { if (this.#tails.get(channel) === sending) this.#tails.delete(channel) })
    return await sending
  }

  subscribe (channel: string, handler: BusHandler): () => void {
    let handlers = this.#handlers.get(channel)
    if (!handlers) {
      handlers = new Set()
      this.#handlers.set(channel, handlers)
      this.#changed(channel)
    }
    handlers.add(handler)
    return () => {
      const current = this.#handlers.get(channel)
      if (!current?.delete(handler) || current.size > 0) return
      this.#handlers.delete(channel)
      this.#changed(channel)
    }
  }

  /**
   * Resolves once every subscription made so far is in the listener table, on a connection that listens (after
   * the attempt to connect in progress, if any). Never rejects: while PostgreSQL is unreachable it resolves at
   * once, and the subscriptions are registered when the connection is back.
   */
  async subscribed (): Promise<void> {
    await this.#listener.settled()
    // Changes not taken by the round in progress are taken by the one after it.
    const waiting = this.#dirty.size > 0
    if (this.#round !== null) await this.#round
    if (waiting && this.#round !== null) await this.#round
  }

  /** One statement: resolves with how many processes it reached; 0 when PostgreSQL is unreachable. */
  async #send (channel: string, text: string): Promise<number> {
    // What this process subscribed to before the publish must hear it.
    if (this.#round !== null || this.#dirty.size > 0) await this.subscribed()
    const statement = Buffer.byteLength(text) <= MAX_NOTIFY_BYTES ? this.#sql.publish : this.#sql.publishStored
    try {
      const result = await this.#pool.query<{ n: number }>({ ...statement, values: [channel, text] })
      return result.rows[0]?.n ?? 0
    } catch {
      return 0
    }
  }

  #changed (channel: string): void {
    this.#dirty.add(channel)
    this.#write()
  }

  /** Starts a round writing the changed channels to the listener table, unless one runs or there is no connection. */
  #write (): void {
    if (this.#round !== null || this.#closed || this.#dirty.size === 0 || this.#listener.client === null) return
    this.#round = this.#writeRound()
  }

  /**
   * Writes what #dirty holds when it begins, in batches; then starts the next round if more changed meanwhile. A
   * write that fails ends the connection: on the next one, #register writes everything again.
   */
  async #writeRound (): Promise<void> {
    // Subscriptions made in the same tick go in the same round.
    await Promise.resolve()
    const channels = [...this.#dirty]
    this.#dirty.clear()
    for (let i = 0; i < channels.length; i += CHANGE_BATCH) {
      const batch = channels.slice(i, i + CHANGE_BATCH)
      const added = batch.filter((channel) => this.#handlers.has(channel) && !this.#stored.has(channel))
      const dropped = batch.filter((channel) => !this.#handlers.has(channel) && this.#stored.has(channel))
      if (added.length === 0 && dropped.length === 0) continue
      const client = this.#listener.client
      try {
        if (client === null) throw new Error('the LISTEN connection is lost')
        await client.query({ ...this.#sql.change, values: [this.#processId, dropped, added] })
      } catch (err) {
        for (const channel of channels.slice(i)) this.#dirty.add(channel)
        if (client !== null) this.#listener.drop(client, err as Error)
        this.#round = null
        // A newer connection takes them at once; without one, #register takes everything when it comes.
        this.#write()
        return
      }
      for (const channel of added) this.#stored.add(channel)
      for (const channel of dropped) this.#stored.delete(channel)
    }
    // In the same synchronous step: whoever waits on this round finds the next one in #round.
    this.#round = null
    this.#write()
  }

  /**
   * On each new LISTEN connection: this process listens there (its row names the connection's backend), and
   * listens to exactly the channels it has handlers for, in one transaction. Then processes gone are swept.
   */
  async #register (client: pg.Client): Promise<void> {
    const channels = [...this.#handlers.keys()]
    this.#dirty.clear()
    await client.query('BEGIN')
    try {
      const registered = await client.query(this.#sql.register, [this.#processId, this.#channel])
      if (registered.rowCount !== 1) throw new Error('the LISTEN connection is not in pg_stat_activity')
      await client.query(this.#sql.forget, [this.#processId])
      for (let i = 0; i < channels.length; i += CHANGE_BATCH) {
        await client.query({ ...this.#sql.change, values: [this.#processId, [], channels.slice(i, i + CHANGE_BATCH)] })
      }
      await client.query('COMMIT')
    } catch (err) {
      // The transaction's own error is the one thrown; a connection that cannot roll back is lost and set up again.
      await client.query('ROLLBACK').catch(ignoreWithTrace(this.#log, 'ROLLBACK failed after a failed subscription change'))
      for (const channel of channels) this.#dirty.add(channel)
      throw err
    }
    this.#stored = new Set(channels)
    await this.#sweep(client)
  }

  /** Sweeps on the LISTEN connection; one on which it fails is given up (the listener opens another). */
  async #check (): Promise<void> {
    const client = this.#listener.client
    if (client === null) return
    await client.query(this.#sql.sweep).catch((err: unknown) => this.#listener.drop(client, err as Error))
  }

  async #sweep (client: pg.Client): Promise<void> {
    await client.query(this.#sql.sweep).catch((err: unknown) => {
      this.#log?.warn({ err: (err as Error).message }, 'the bus could not delete the rows of processes that are gone')
    })
  }
}
