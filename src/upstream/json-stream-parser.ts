import { StringDecoder } from 'node:string_decoder'

/**
 * An incremental splitter of a JSON body into its top-level values: one object (or batch array) for a
 * plain response, or several written one after the other as things happen (as some servers answer
 * `subscriptions/listen` with `application/json`, one message per line). It tracks nesting outside
 * strings, so each value is parsed once, when it is complete, however it is split over chunks and lines.
 * Only objects and arrays are split out; anything else is left for `end()`.
 */
export class JsonStreamParser {
  readonly #decoder = new StringDecoder('utf8')
  readonly #onValue: (text: string) => void
  #pending = ''
  /** Where scanning resumes in `#pending`, and the state of the scan there. */
  #scanned = 0
  #depth = 0
  #inString = false
  #escaped = false

  /** `onValue` gets the text of each complete top-level object or array. */
  constructor (onValue: (text: string) => void) {
    this.#onValue = onValue
  }

  push (chunk: Buffer): void {
    this.#pending += this.#decoder.write(chunk)
    let start = 0
    for (let i = this.#scanned; i < this.#pending.length; i++) {
      const c = this.#pending[i]
      if (this.#inString) {
        if (this.#escaped) this.#escaped = false
        else if (c === '\\') this.#escaped = true
        else if (c === '"') this.#inString = false
      } else if (c === '"') {
        this.#inString = true
      } else if (c === '{' || c === '[') {
        this.#depth++
      } else if ((c === '}' || c === ']') && --this.#depth === 0) {
        this.#onValue(this.#pending.slice(start, i + 1))
        start = i + 1
      }
    }
    this.#pending = this.#pending.slice(start)
    this.#scanned = this.#pending.length
  }

  /** The text after the last complete object or array (whitespace between values dropped). */
  end (): string {
    return (this.#pending + this.#decoder.end()).trim()
  }
}
