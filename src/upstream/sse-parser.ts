import { StringDecoder } from 'node:string_decoder'

export interface ParsedSseEvent {
  id?: string
  event?: string
  data: string
}

/**
 * An incremental Server-Sent Events parser over Buffers (the WHATWG event-stream format: fields
 * `data`, `event`, `id`, comments, CR/LF/CRLF line ends). `retry` is ignored: reconnect timing is the
 * transport's own.
 */
export class SseParser {
  readonly #decoder = new StringDecoder('utf8')
  readonly #onEvent: (event: ParsedSseEvent) => void
  #pending = ''
  #data: string[] = []
  #event: string | undefined
  #id: string | undefined

  constructor (onEvent: (event: ParsedSseEvent) => void) {
    this.#onEvent = onEvent
  }

  push (chunk: Buffer): void {
    this.#pending += this.#decoder.write(chunk)
    let start = 0
    for (;;) {
      const lf = this.#pending.indexOf('\n', start)
      const cr = this.#pending.indexOf('\r', start)
      let end = lf
      if (cr >= 0 && (lf < 0 || cr < lf)) end = cr
      if (end < 0) break
      // A CR at the very end may be the first half of a CRLF still in flight.
      if (end === cr && cr === this.#pending.length - 1) break
      this.#line(this.#pending.slice(start, end))
      start = end + (end === cr && this.#pending[cr + 1] === '\n' ? 2 : 1)
    }
    this.#pending = this.#pending.slice(start)
  }

  #line (line: string): void {
    if (line === '') {
      this.#dispatch()
      return
    }
    if (line.startsWith(':')) return
    const colon = line.indexOf(':')
    const field = colon < 0 ? line : line.slice(0, colon)
    let value = colon < 0 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'data') this.#data.push(value)
    else if (field === 'event') this.#event = value
    else if (field === 'id' && !value.includes('\0')) this.#id = value
  }

  #dispatch (): void {
    if (this.#data.length === 0 && this.#event === undefined) {
      if (this.#id !== undefined) this.#onEvent({ id: this.#id, data: '' })
      this.#id = undefined
      return
    }
    const event: ParsedSseEvent = { data: this.#data.join('\n') }
    if (this.#id !== undefined) event.id = this.#id
    if (this.#event !== undefined) event.event = this.#event
    this.#data = []
    this.#event = undefined
    this.#id = undefined
    this.#onEvent(event)
  }
}
