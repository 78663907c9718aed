import { deserializeMessage, type JSONRPCMessage } from '@modelcontextprotocol/client'
import type { RequestId } from '../wire/jsonrpc.ts'
import { limitFor, tooLargeResponse, type ResponseLimits } from './response-limit.ts'

const LF = 0x0a
/** Bytes kept of each end of a line that passed the limit: where a response's id is. */
const EDGE_BYTES = 256
const ID = String.raw`(-?\d+|"(?:[^"\\]|\\.)*")`
/** A response whose id comes first (`{"jsonrpc":"2.0","id":1,"result":…`, as SDKs other than the TypeScript one write it). */
const ID_FIRST = new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*${ID}\s*,\s*"(?:result|error)"\s*:`)
/** A response whose result or error comes first: then its id is its last member (`…,"id":1}`, as the TypeScript SDK writes it). */
const RESULT_FIRST = /^\s*\{\s*"(?:result|error)"\s*:/
const ID_LAST = new RegExp(String.raw`"id"\s*:\s*${ID}\s*\}\s*$`)

/** A line that passed the limit: its length, and its two ends. */
interface SkippedLine {
  bytes: number
  head: string
  tail: string
}

/** The first `n` bytes of `pieces`. */
function firstBytes (pieces: readonly Buffer[], n: number): Buffer {
  const taken: Buffer[] = []
  let bytes = 0
  for (const piece of pieces) {
    if (bytes >= n) break
    taken.push(piece.subarray(0, n - bytes))
    bytes += Math.min(piece.length, n - bytes)
  }
  return Buffer.concat(taken, bytes)
}

/** The last `n` bytes of `pieces`, copied (the pieces they came from are let go). */
function lastBytes (pieces: readonly Buffer[], n: number): Buffer {
  const taken: Buffer[] = []
  let bytes = 0
  for (let i = pieces.length - 1; i >= 0 && bytes < n; i--) {
    const piece = pieces[i]!
    taken.unshift(piece.subarray(Math.max(0, piece.length - (n - bytes))))
    bytes += Math.min(piece.length, n - bytes)
  }
  return Buffer.concat(taken, bytes)
}

/** The id of the JSON-RPC response a skipped line held, when its ends tell it; undefined for anything else. */
export function responseIdOf (head: string, tail: string): RequestId | undefined {
  const first = ID_FIRST.exec(head)
  const text = first?.[1] ?? (RESULT_FIRST.test(head) ? ID_LAST.exec(tail)?.[1] : undefined)
  if (text === undefined) return undefined
  return text.startsWith('"') ? JSON.parse(text) as string : Number(text)
}

/**
 * The read buffer of a stdio upstream's transport, in place of the SDK's (which copies its whole buffer on
 * every chunk, and on a line over its limit fails and stops the process, so every call in flight fails with a
 * lost connection). It splits lines in time linear in their length (each chunk is searched once, a line's
 * pieces are joined once) and holds at most `maxResponseBytes` of a line: the rest of a longer one is skipped,
 * keeping only its two ends. When these show a response (its id at the start or the end), that request fails
 * with GW_ERR_UPSTREAM_RESPONSE_TOO_LARGE; the process and its other calls go on.
 */
export class StdioLineReader {
  readonly #limits: ResponseLimits
  #pieces: Buffer[] = []
  #bytes = 0
  /** The start of the line being skipped, and its last bytes so far. */
  #head: Buffer | undefined
  #tail: Buffer | undefined
  readonly #lines: Array<Buffer | SkippedLine> = []

  constructor (limits: ResponseLimits) {
    this.#limits = limits
  }

  append (chunk: Buffer): void {
    let start = 0
    for (let lf = chunk.indexOf(LF); lf >= 0; lf = chunk.indexOf(LF, start)) {
      this.#keep(chunk.subarray(start, lf))
      this.#endLine()
      start = lf + 1
    }
    this.#keep(chunk.subarray(start))
  }

  /** The next message (or the error response of a request whose answer was skipped); null when no line is complete. */
  readMessage (): JSONRPCMessage | null {
    for (let line = this.#lines.shift(); line !== undefined; line = this.#lines.shift()) {
      if (!Buffer.isBuffer(line)) return this.#skipped(line)
      try {
        return deserializeMessage(line.toString('utf8').replace(/\r$/, ''))
      } catch (error) {
        // As the SDK's own buffer: a line that is not JSON is passed over (servers that log on stdout).
        if (error instanceof SyntaxError) continue
        throw error
      }
    }
    return null
  }

  clear (): void {
    this.#pieces = []
    this.#bytes = 0
    this.#head = undefined
    this.#tail = undefined
    this.#lines.length = 0
  }

  #keep (piece: Buffer): void {
    if (piece.length === 0) return
    this.#bytes += piece.length
    if (this.#head !== undefined) {
      this.#tail = lastBytes([this.#tail!, piece], EDGE_BYTES)
      return
    }
    if (this.#bytes <= this.#limits.maxResponseBytes) {
      this.#pieces.push(piece)
      return
    }
    const pieces = [...this.#pieces, piece]
    this.#head = firstBytes(pieces, EDGE_BYTES)
    this.#tail = lastBytes(pieces, EDGE_BYTES)
    this.#pieces = []
  }

  #endLine (): void {
    if (this.#head !== undefined) {
      this.#lines.push({ bytes: this.#bytes, head: this.#head.toString('utf8'), tail: this.#tail!.toString('utf8').replace(/\r$/, '') })
    } else if (this.#bytes > 0) {
      this.#lines.push(this.#pieces.length === 1 ? this.#pieces[0]! : Buffer.concat(this.#pieces, this.#bytes))
    }
    this.#pieces = []
    this.#bytes = 0
    this.#head = undefined
    this.#tail = undefined
  }

  /** A skipped line fails the request it answered; one whose id cannot be told is reported as a transport error. */
  #skipped (line: SkippedLine): JSONRPCMessage {
    const id = responseIdOf(line.head, line.tail)
    const tooLarge = limitFor(this.#limits, undefined).exceeded(line.bytes)
    this.#limits.onTooLarge?.(tooLarge, id)
    if (id !== undefined) return tooLargeResponse(id, tooLarge)
    throw new Error(`the upstream wrote a message of ${line.bytes} bytes, over maxResponseBytes (${tooLarge.bytes} bytes); it was skipped, and it is not a response whose request could be failed`)
  }
}
