import type pg from 'pg'
import type { Logger } from '../../observability/logger.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import type { BusHandler } from '../types.ts'
import type { BusStatements } from './postgres-bus-sql.ts'
import { ignoreWithTrace } from '../../observability/ignored.ts'

export interface InboxOptions {
  /** The LISTEN connection, on which stored messages are read; null while it is lost. */
  client: () => pg.Client | null
  sql: BusStatements
  /** The handlers of a bus channel. */
  handlers: (channel: string) => ReadonlySet<BusHandler> | undefined
  log?: Logger | undefined
}

/**
 * What a bus receives, handed to its handlers in the order the notifications came: a notification carries
 * `[channel, message]`, or the id of a message stored for being too long, which is read first while the
 * notifications after it wait (one publisher's messages on a channel keep their order, long ones among them).
 */
export class BusInbox {
  readonly #options: InboxOptions
  /** Payloads received while an earlier one (a stored message) is being read. */
  readonly #waiting: string[] = []
  #reading = false

  constructor (options: InboxOptions) {
    this.#options = options
  }

  /** A notification's payload: delivered at once, or after the payloads before it. */
  received (payload: string): void {
    if (!this.#reading && payload.startsWith('[')) {
      this.#deliver(payload)
      return
    }
    this.#waiting.push(payload)
    if (!this.#reading) void this.#readAll()
  }

  async #readAll (): Promise<void> {
    this.#reading = true
    for (let payload = this.#waiting.shift(); payload !== undefined; payload = this.#waiting.shift()) {
      const text = payload.startsWith('[') ? payload : await this.#readStored(payload)
      if (text !== undefined) this.#deliver(text)
    }
    this.#reading = false
  }

  /** The text of a stored message (counted as read: the last reader deletes it); undefined when it is gone. */
  async #readStored (id: string): Promise<string | undefined> {
    const client = this.#options.client()
    if (!/^\d+$/.test(id) || client === null) return undefined
    try {
      const result = await client.query<{ body: string, remaining: number }>({ ...this.#options.sql.read, values: [id] })
      const row = result.rows[0]
      if (row === undefined) return undefined
      if (row.remaining <= 0) client.query({ ...this.#options.sql.drop, values: [id] }).catch(ignoreWithTrace(this.#options.log, 'a bus message read by every listener was not deleted; the sweep deletes it after five minutes'))
      return row.body
    } catch {
      return undefined
    }
  }

  /**
   * Hands a message to the channel's handlers. What is not `[channel, message]` was not written by a bus and is
   * dropped; a message that is not a JSON object is handed on as {}, which the signed bus above refuses (and
   * counts) as unsigned.
   */
  #deliver (text: string): void {
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      return
    }
    if (!Array.isArray(parsed) || parsed.length !== 2 || typeof parsed[0] !== 'string') return
    const handlers = this.#options.handlers(parsed[0])
    if (!handlers) return
    const message: unknown = parsed[1]
    const object = typeof message === 'object' && message !== null && !Array.isArray(message) ? message as JsonObject : {}
    for (const handler of [...handlers]) {
      try {
        handler(object)
      } catch (err) {
        this.#options.log?.error({ err }, 'a bus handler threw')
      }
    }
  }
}
