import type { BusHandler, SignalBus } from '../types.ts'
import type { JsonObject } from '../../wire/jsonrpc.ts'

/** In-process signal bus: enough for one gateway process (memory and sqlite stores). */
export class MemoryBus implements SignalBus {
  readonly #channels = new Map<string, Set<BusHandler>>()

  async publish (channel: string, message: JsonObject): Promise<number> {
    const handlers = this.#channels.get(channel)
    if (!handlers) return 0
    for (const handler of [...handlers]) handler(message)
    return 1
  }

  subscribe (channel: string, handler: BusHandler): () => void {
    let handlers = this.#channels.get(channel)
    if (!handlers) {
      handlers = new Set()
      this.#channels.set(channel, handlers)
    }
    handlers.add(handler)
    return () => {
      const current = this.#channels.get(channel)
      if (!current) return
      current.delete(handler)
      if (current.size === 0) this.#channels.delete(channel)
    }
  }

  /** In process: a subscription takes effect at once. */
  async subscribed (): Promise<void> {}

  get channelCount (): number {
    return this.#channels.size
  }
}
