import type { ServerResponse } from 'node:http'

/** How SSE connections keep alive, and when they give up on a client that does not read them. */
export interface SseSettings {
  keepAliveMs: number
  /** Close when what was written has waited unread this long (a write found the socket full and no 'drain' followed). */
  stallTimeoutMs: number
  /**
   * Close, instead of writing more, when more than this many bytes already wait unread: what one client
   * can make the gateway hold is bounded by this plus one message (a single large result still goes out).
   */
  bufferBytes: number
}

export interface SseConnectionOptions extends SseSettings {
  headers?: Record<string, string>
  retryMs?: number
  /** Told why, just before the connection is closed because its client stopped reading. */
  onStalled?: (reason: string, unreadBytes: number) => void
}

/**
 * One HTTP response carrying Server-Sent Events. It writes `event: message` frames with ids, keeps
 * the connection alive with comments, and reports when the peer goes away. It knows nothing of MCP.
 *
 * A client that stops reading would make every write pile up in memory, so the connection watches
 * its own backlog: a write the socket could not take starts the stall timer, 'drain' stops it, and
 * when it fires (or more would be written onto a backlog past `bufferBytes`) the response is destroyed, which to everyone
 * listening looks exactly like the client going away. Keep-alive comments never restart the timer and
 * are skipped while data waits unread.
 */
export class SseConnection {
  readonly #res: ServerResponse
  readonly #options: SseConnectionOptions
  readonly #keepAlive: NodeJS.Timeout
  #stall: NodeJS.Timeout | undefined
  #open = true
  readonly #onClose: Array<() => void> = []

  constructor (res: ServerResponse, options: SseConnectionOptions) {
    this.#res = res
    this.#options = options
    res.writeHead(200, {
      ...options.headers,
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    })
    res.flushHeaders()
    this.#keepAlive = setInterval(() => {
      if (!res.writableNeedDrain) this.#write(': keep-alive\n\n')
    }, options.keepAliveMs)
    this.#keepAlive.unref()
    const gone = (): void => {
      this.#drained()
      this.#closed()
    }
    res.on('close', gone)
    res.on('error', gone)
    res.on('drain', () => this.#drained())
    res.on('finish', () => this.#drained())
    if (options.retryMs !== undefined) this.#write(`retry: ${options.retryMs}\n\n`)
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

  /** Ends the response; a backlog its client does not read within the stall timeout still gets it destroyed. */
  end (): void {
    if (!this.#open) return
    this.#res.end()
    this.#closed()
  }

  #write (frame: string): boolean {
    if (!this.#open || this.#res.writableEnded) return false
    if (this.#res.writableLength > this.#options.bufferBytes) {
      this.#giveUp(`more than ${this.#options.bufferBytes} bytes waited unread`)
      return false
    }
    const flushed = this.#res.write(frame)
    if (!flushed && this.#stall === undefined) {
      this.#stall = setTimeout(() => this.#giveUp(`nothing was read for ${this.#options.stallTimeoutMs}ms`), this.#options.stallTimeoutMs)
      this.#stall.unref()
    }
    return true
  }

  #drained (): void {
    clearTimeout(this.#stall)
    this.#stall = undefined
  }

  /** Destroying the response drops its backlog and closes the socket; release everything at once. */
  #giveUp (reason: string): void {
    this.#drained()
    if (this.#res.destroyed) return
    this.#options.onStalled?.(reason, this.#res.writableLength)
    // A reset, not a FIN: a FIN would wait in the kernel behind the backlog that the client does not read.
    this.#res.socket?.resetAndDestroy()
    this.#res.destroy()
    this.#closed()
  }

  #closed (): void {
    if (!this.#open) return
    this.#open = false
    clearInterval(this.#keepAlive)
    for (const listener of this.#onClose.splice(0)) listener()
  }
}
