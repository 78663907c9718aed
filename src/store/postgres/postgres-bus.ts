import type pg from 'pg'
import type { Logger } from '../../observability/logger.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'
import type { BusHandler, SignalBus } from '../types.ts'
import { MemoryBus } from '../memory/memory-bus.ts'

// PLACEHOLDER: an in-process stand-in with the agreed API of the PostgreSQL bus (LISTEN/NOTIFY), which replaces
// this file. Stores of one Node process on one schema share it; other processes hear nothing.

export interface PostgresBusOptions {
  /** For publishing and for its own tables. */
  pool: pg.Pool
  /** Settings for its dedicated LISTEN connection (same as the pool's). */
  connection: pg.ClientConfig
  /** The store's schema: its tables live there; channels are namespaced by it. */
  schema: string
  /** Unique per store instance (randomUUID). */
  processId: string
  log?: Logger
}

const buses = new Map<string, { bus: MemoryBus, users: number }>()

export class PostgresBus implements SignalBus {
  readonly #schema: string
  #shared: MemoryBus | undefined

  constructor (options: PostgresBusOptions) {
    this.#schema = options.schema
  }

  /** Opens the LISTEN connection; the store awaits it in ready(). */
  async start (): Promise<void> {
    let entry = buses.get(this.#schema)
    if (entry === undefined) buses.set(this.#schema, entry = { bus: new MemoryBus(), users: 0 })
    entry.users++
    this.#shared = entry.bus
  }

  async close (): Promise<void> {
    const entry = buses.get(this.#schema)
    if (this.#shared === undefined || entry === undefined) return
    this.#shared = undefined
    if (--entry.users === 0) buses.delete(this.#schema)
  }

  async publish (channel: string, message: JsonObject): Promise<number> {
    return await this.#shared?.publish(channel, message) ?? 0
  }

  subscribe (channel: string, handler: BusHandler): () => void {
    return this.#bus().subscribe(channel, handler)
  }

  async subscribed (): Promise<void> {}

  #bus (): MemoryBus {
    if (this.#shared === undefined) throw new Error('the bus is not started')
    return this.#shared
  }
}

/** The bus's own DDL (idempotent), run as one step of the store's migrations. */
export function busTables (_schema: string): string[] {
  return []
}
