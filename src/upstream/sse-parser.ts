export interface ParsedSseEvent {
  id?: string
  event?: string
  data: string
}

export interface SseParserOptions {
  /** Largest event (the bytes of its lines) the parser holds; the rest of a larger one is dropped. */
  maxEventBytes?: number | undefined
  /** An event passed maxEventBytes (told once per event, with the bytes seen so far); it is not dispatched. */
  onTooLarge?: ((bytes: number) => void) | undefined
  /** A `retry` field set the reconnection time (ms) a client of the stream should wait before it reconnects. */
  onRetry?: ((ms: number) => void) | undefined
}

const LF = 0x0a
const CR = 0x0d

/**
 * An incremental Server-Sent Events parser over Buffers (the WHATWG event-stream format: fields
 * `data`, `event`, `id`, `retry`, comments, CR/LF/CRLF line ends). A `retry` field is no part of an event: it
 * is reported as it comes (`onRetry`), for the transport to wait that long before it reconnects.
 *
 * It works in time linear in its input, however the stream is cut: each byte is looked at once, when its
 * chunk arrives (the next CR and LF of a chunk are found once, not again for every line), the pieces of a
 * line are kept as they came, and a line is decoded once, whole, when its end arrives (CR and LF never occur
 * inside a UTF-8 sequence, so a line's bytes decode alone). An event over `maxEventBytes` is not held: its
 * pieces are dropped as they come until the blank line that ends it.
 */
export class SseParser {
  readonly #onEvent: (event: ParsedSseEvent) => void
  readonly #maxEventBytes: number
  readonly #onTooLarge: ((bytes: number) => void) | undefined
  readonly #onRetry: ((ms: number) => void) | undefined
  /** The pieces of the line not yet ended, and its length in bytes (counted even when the pieces are dropped). */
  #line: Buffer[] = []
  #lineBytes = 0
  /** The last chunk ended with a CR: a LF first in the next one is the rest of a CRLF. */
  #afterCr = false
  #eventBytes = 0
  #tooLarge = false
  #data: string[] = []
  #event: string | undefined
  #id: string | undefined

  constructor (onEvent: (event: ParsedSseEvent) => void, options: SseParserOptions = {}) {
    this.#onEvent = onEvent
    this.#maxEventBytes = options.maxEventBytes ?? Number.POSITIVE_INFINITY
    this.#onTooLarge = options.onTooLarge
    this.#onRetry = options.onRetry
  }

  push (chunk: Buffer): void {
    let start = 0
    if (this.#afterCr) {
      this.#afterCr = false
      if (chunk[0] === LF) start = 1
    }
    // The next LF and CR at or after `start`; -1 once there is none left in the chunk.
    let lf = chunk.indexOf(LF, start)
    let cr = chunk.indexOf(CR, start)
    while (start < chunk.length) {
      if (lf >= 0 && lf < start) lf = chunk.indexOf(LF, start)
      if (cr >= 0 && cr < start) cr = chunk.indexOf(CR, start)
      const end = cr >= 0 && (lf < 0 || cr < lf) ? cr : lf
      if (end < 0) {
        this.#keep(chunk.subarray(start))
        return
      }
      this.#keep(chunk.subarray(start, end))
      this.#endLine()
      start = end + 1
      if (end === cr) {
        if (start === chunk.length) this.#afterCr = true
        else if (chunk[start] === LF) start++
      }
    }
  }

  #keep (piece: Buffer): void {
    if (piece.length === 0) return
    this.#lineBytes += piece.length
    if (this.#tooLarge) return
    this.#eventBytes += piece.length
    if (this.#eventBytes <= this.#maxEventBytes) {
      this.#line.push(piece)
      return
    }
    this.#tooLarge = true
    this.#line = []
    this.#data = []
    this.#onTooLarge?.(this.#eventBytes)
  }

  #endLine (): void {
    const bytes = this.#lineBytes
    const pieces = this.#line
    this.#line = []
    this.#lineBytes = 0
    if (bytes === 0) {
      this.#dispatch()
      return
    }
    if (this.#tooLarge) return
    this.#field(pieces.length === 1 ? pieces[0]!.toString('utf8') : Buffer.concat(pieces, bytes).toString('utf8'))
  }

  #field (line: string): void {
    if (line.startsWith(':')) return
    const colon = line.indexOf(':')
    const field = colon < 0 ? line : line.slice(0, colon)
    let value = colon < 0 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'data') this.#data.push(value)
    else if (field === 'event') this.#event = value
    else if (field === 'id' && !value.includes('\0')) this.#id = value
    else if (field === 'retry' && /^[0-9]+$/.test(value)) this.#onRetry?.(Number(value))
  }

  #dispatch (): void {
    const tooLarge = this.#tooLarge
    this.#tooLarge = false
    this.#eventBytes = 0
    if (tooLarge) {
      this.#data = []
      this.#event = undefined
      this.#id = undefined
      return
    }
    if (this.#data.length === 0 && this.#event === undefined) {
      if (this.#id !== undefined) this.#onEvent({ id: this.#id, data: '' })
      this.#id = undefined
      return
    }
    const event: ParsedSseEvent = { data: this.#data.length === 1 ? this.#data[0]! : this.#data.join('\n') }
    if (this.#id !== undefined) event.id = this.#id
    if (this.#event !== undefined) event.event = this.#event
    this.#data = []
    this.#event = undefined
    this.#id = undefined
    this.#onEvent(event)
  }
}
