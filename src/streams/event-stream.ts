import type { SseConnection } from './sse-connection.ts'
import type { RpcMessage } from '../wire/jsonrpc.ts'

/** Events a stream keeps for resumption (Last-Event-ID) after they were written. */
const REPLAY_LIMIT = 256

/**
 * A logical SSE stream of one session: the stream of one POSTed request, or a standalone GET stream.
 * It may outlive the HTTP connection that carried it: events sent while no connection is attached are
 * kept, and a GET with `Last-Event-ID: <streamId>:<seq>` attaches a new connection and replays them.
 */
export class EventStream {
  readonly id: string
  readonly sessionId: string
  readonly kind: 'request' | 'standalone'
  #seq = 0
  readonly #buffer: Array<{ seq: number, data: string }> = []
  #connection: SseConnection | undefined
  #finished = false
  readonly #onDetach: Array<() => void> = []

  constructor (id: string, sessionId: string, kind: 'request' | 'standalone') {
    this.id = id
    this.sessionId = sessionId
    this.kind = kind
  }

  get finished (): boolean {
    return this.#finished
  }

  get attached (): boolean {
    return this.#connection?.open === true
  }

  /** The open connection carrying the stream, if any. */
  get connection (): SseConnection | undefined {
    return this.#connection?.open === true ? this.#connection : undefined
  }

  /** Attaches a connection (replacing one still attached), first writing every kept event after `afterSeq`. */
  attach (connection: SseConnection, afterSeq = 0): void {
    const previous = this.#connection
    this.#connection = connection
    previous?.end()
    connection.prime(`${this.id}:${this.#seq}`)
    for (const event of this.#buffer) {
      if (event.seq > afterSeq) connection.send(event.data, `${this.id}:${event.seq}`)
    }
    connection.onClose(() => {
      if (this.#connection !== connection) return
      this.#connection = undefined
      for (const listener of this.#onDetach.splice(0)) listener()
    })
    if (this.#finished) connection.end()
  }

  onDetach (listener: () => void): void {
    this.#onDetach.push(listener)
  }

  send (message: RpcMessage): void {
    if (this.#finished) return
    const seq = ++this.#seq
    const data = JSON.stringify(message)
    this.#buffer.push({ seq, data })
    if (this.#buffer.length > REPLAY_LIMIT) this.#buffer.shift()
    this.#connection?.send(data, `${this.id}:${seq}`)
  }

  /** No more events: the attached connection (if any) ends; kept events stay replayable. */
  finish (): void {
    if (this.#finished) return
    this.#finished = true
    this.#connection?.end()
  }
}

export function parseEventId (value: string | undefined): { streamId: string, seq: number } | undefined {
  if (value === undefined) return undefined
  const colon = value.lastIndexOf(':')
  if (colon <= 0) return undefined
  const seq = Number(value.slice(colon + 1))
  if (!Number.isInteger(seq) || seq < 0) return undefined
  return { streamId: value.slice(0, colon), seq }
}
