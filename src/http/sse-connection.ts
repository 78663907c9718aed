import type { ServerResponse } from 'node:http'

/**
 * One HTTP response carrying Server-Sent Events. It writes `event: message` frames with ids, keeps
 * the connection alive with comments, and reports when the peer goes away. It knows nothing of MCP.
 */
export class SseConnection {
  readonly #res: ServerResponse
  readonly #keepAlive: NodeJS.Timeout
  #open = true
  readonly #onClose: Array<() => void> = []

  constructor (res: ServerResponse, options: { keepAliveMs: number, headers?: Record<string, string>, retryMs?: number }) {
    this.#res = res
    res.writeHead(200, {
      ...options.headers,
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    })
    res.flushHeaders()
    if (options.retryMs !== undefined) res.write(`retry: ${options.retryMs}\n\n`)
    this.#keepAlive = setInterval(() => this.#write(': keep-alive\n\n'), options.keepAliveMs)
    this.#keepAlive.unref()
    const closed = (): void => this.#closed()
    res.on('close', closed)
    res.on('error', closed)
  }

  get open (): boolean {
    return this.#open
  }

  /** Sends one event; returns false when the connection is already gone. */
  send (data: string, id?: string): boolean {
    const frame = id === undefined ? `event: message\ndata: ${data}\n\n` : `id: ${id}\nevent: message\ndata: ${data}\n\n`
    return this.#write(frame)
  }

  /** An event with an id and no data: lets a client resume the stream with Last-Event-ID. */
  prime (id: string): boolean {
    return this.#write(`id: ${id}\ndata: \n\n`)
  }

  onClose (listener: () => void): void {
    if (this.#open) this.#onClose.push(listener)
    else listener()
  }

  end (): void {
    if (!this.#open) return
    this.#res.end()
    this.#closed()
  }

  #write (frame: string): boolean {
    if (!this.#open || this.#res.writableEnded) return false
    this.#res.write(frame)
    return true
  }

  #closed (): void {
    if (!this.#open) return
    this.#open = false
    clearInterval(this.#keepAlive)
    for (const listener of this.#onClose.splice(0)) listener()
  }
}
