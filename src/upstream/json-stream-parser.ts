export interface JsonStreamParserOptions {
  /** Largest value (in bytes) the parser holds; a larger one is not held, and the parser takes nothing more. */
  maxValueBytes?: number | undefined
  /** A value passed maxValueBytes (with the bytes seen of it so far). */
  onTooLarge?: ((bytes: number) => void) | undefined
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d

/**
 * An incremental splitter of a JSON body into its top-level values: one object (or batch array) for a
 * plain response, or several written one after the other as things happen (as some servers answer
 * `subscriptions/listen` with `application/json`, one message per line). It tracks nesting outside
 * strings, so each value is parsed once, when it is complete, however it is split over chunks and lines.
 * Only objects and arrays are split out; anything else is left for `end()`.
 *
 * It works on bytes, in time linear in its input: each byte is looked at once (inside a string, the next
 * quote and backslash are found natively), the pieces of a value are kept as they came and decoded once,
 * whole, when the value ends (the bytes it looks for never occur inside a UTF-8 sequence). A value over
 * `maxValueBytes` is not held.
 */
export class JsonStreamParser {
  readonly #onValue: (text: string) => void
  readonly #maxValueBytes: number
  readonly #onTooLarge: ((bytes: number) => void) | undefined
  /** The bytes after the last complete value, as they came. */
  #pending: Buffer[] = []
  #pendingBytes = 0
  #depth = 0
  #inString = false
  #escaped = false
  #tooLarge = false

  /** `onValue` gets the text of each complete top-level object or array. */
  constructor (onValue: (text: string) => void, options: JsonStreamParserOptions = {}) {
    this.#onValue = onValue
    this.#maxValueBytes = options.maxValueBytes ?? Number.POSITIVE_INFINITY
    this.#onTooLarge = options.onTooLarge
  }

  push (chunk: Buffer): void {
    if (this.#tooLarge) return
    let start = 0
    // Inside a string only a quote or a backslash matters: the next of each, found once and again only when passed.
    let quote = -2
    let backslash = -2
    for (let i = 0; i < chunk.length; i++) {
      if (this.#inString) {
        if (this.#escaped) {
          this.#escaped = false
          continue
        }
        if (quote !== -1 && quote < i) quote = chunk.indexOf(QUOTE, i)
        if (backslash !== -1 && backslash < i) backslash = chunk.indexOf(BACKSLASH, i)
        if (quote < 0 && backslash < 0) break
        if (backslash >= 0 && (quote < 0 || backslash < quote)) {
          i = backslash
          this.#escaped = true
        } else {
          i = quote
          this.#inString = false
        }
        continue
      }
      const c = chunk[i]
      if (c === QUOTE) {
        this.#inString = true
      } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
        this.#depth++
      } else if ((c === CLOSE_BRACE || c === CLOSE_BRACKET) && --this.#depth === 0) {
        if (this.#over(this.#pendingBytes + i + 1 - start)) return
        this.#take(chunk.subarray(start, i + 1))
        start = i + 1
      }
    }
    if (start === chunk.length) return
    if (this.#over(this.#pendingBytes + chunk.length - start)) return
    this.#pending.push(chunk.subarray(start))
    this.#pendingBytes += chunk.length - start
  }

  /** The text after the last complete object or array (whitespace between values dropped). */
  end (): string {
    if (this.#tooLarge) return ''
    return Buffer.concat(this.#pending, this.#pendingBytes).toString('utf8').trim()
  }

  #over (bytes: number): boolean {
    if (bytes <= this.#maxValueBytes) return false
    this.#tooLarge = true
    this.#pending = []
    this.#pendingBytes = 0
    this.#onTooLarge?.(bytes)
    return true
  }

  #take (last: Buffer): void {
    const text = this.#pending.length === 0
      ? last.toString('utf8')
      : Buffer.concat([...this.#pending, last], this.#pendingBytes + last.length).toString('utf8')
    this.#pending = []
    this.#pendingBytes = 0
    this.#onValue(text)
  }
}
