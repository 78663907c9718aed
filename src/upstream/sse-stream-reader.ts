import type { JSONRPCMessage } from '@modelcontextprotocol/client'
import { SseParser } from './sse-parser.ts'
import type { Replayed } from './stream-replay.ts'
import { tooLargeResponse, type ResponseLimit, type ResponseLimits, type ResponseTooLarge } from './response-limit.ts'

export type WireMessage = JSONRPCMessage & { id?: unknown, method?: unknown, params?: Record<string, unknown> }

export function isResponse (message: WireMessage): boolean {
  return message.method === undefined && message.id !== undefined
}

/** Where one SSE stream stands, across the connections that carry it (a request's stream resumed after a close). */
export interface StreamCursor {
  /** The id of the last event seen: the Last-Event-ID to reconnect with. */
  lastEventId: string | undefined
  /** The reconnection time the upstream last asked for (`retry:`), in ms. */
  retryMs: number | undefined
  /** The id on the wire of the request whose answer the stream carries; undefined for the standalone stream. */
  answerOf: string | number | undefined
  /** That answer came. */
  answered: boolean
}

export function streamCursor (answerOf: string | number | undefined, lastEventId?: string): StreamCursor {
  return { lastEventId, retryMs: undefined, answerOf, answered: false }
}

/** What a stream's messages go to: the transport that reads it. */
export interface StreamHost {
  /** The transport closed: whatever breaks now is no error. */
  readonly closed: AbortSignal
  readonly limits: ResponseLimits
  /** `viaRequest`: the request on whose response stream the message arrived. */
  deliver (message: WireMessage, viaRequest?: string | number): void
  onerror (error: Error): void
}

export interface EventStreamOptions {
  limit: ResponseLimit
  cursor: StreamCursor
  /** The request (its id as the SDK knows it) whose response stream this is, if any. */
  viaRequest?: string | number | undefined
  requestSignal?: AbortSignal | undefined
  /** Hears each event id. */
  onEventId?: ((eventId: string) => void) | undefined
  /** The stream replays the call `from`, handed on as `to` (another process's call, adopted). */
  replayed?: Replayed | undefined
  /** Stop reading once the answer came: on a resumed stream nothing of the request follows it. */
  endWithAnswer?: boolean
}

/**
 * Reads one SSE body to its end (or, with `endWithAnswer`, to the request's answer), keeping `cursor` up to
 * date. An event over `limit` ends the stream as soon as it passes it (the response is closed, the rest never
 * read) and fails request `viaRequest`; on a stream of no request it is a transport error.
 */
export async function readEventStream (host: StreamHost, body: AsyncIterable<Buffer>, options: EventStreamOptions): Promise<void> {
  const { cursor, limit, viaRequest, replayed } = options
  let tooLarge: ResponseTooLarge | undefined
  const parser = new SseParser((event) => {
    if (event.id !== undefined) {
      cursor.lastEventId = event.id
      options.onEventId?.(event.id)
    }
    if (event.data === '' || (event.event !== undefined && event.event !== 'message')) return
    try {
      let message = JSON.parse(event.data) as WireMessage
      if (replayed !== undefined) {
        // Notifications were passed on by the process that made the call; responses of other calls are not this one's.
        if (message.method !== undefined && message.id === undefined) return
        if (isResponse(message)) {
          if (message.id !== replayed.from || replayed.answered) return
          replayed.answered = true
          message = { ...message, id: replayed.to }
        }
      } else if (isResponse(message) && message.id === cursor.answerOf) cursor.answered = true
      host.deliver(message, viaRequest)
    } catch (err) {
      host.onerror(new Error(`upstream sent an SSE event that is not JSON: ${(err as Error).message}`))
    }
  }, {
    maxEventBytes: limit.bytes,
    onTooLarge: (seen) => {
      tooLarge = limit.exceeded(seen)
      throw tooLarge
    },
    onRetry: (ms) => { cursor.retryMs = ms },
  })
  try {
    for await (const chunk of body) {
      parser.push(chunk)
      if (options.endWithAnswer === true && cursor.answered) break
    }
  } catch (err) {
    if (host.closed.aborted || options.requestSignal?.aborted === true) return
    if (tooLarge === undefined) host.onerror(err instanceof Error ? err : new Error(String(err)))
    else {
      host.limits.onTooLarge?.(tooLarge, viaRequest)
      if (viaRequest === undefined) host.onerror(tooLarge)
      else {
        // A replay that failed its call is over: it is not opened again to read the same answer.
        if (replayed !== undefined) replayed.answered = true
        cursor.answered = true
        host.deliver(tooLargeResponse(viaRequest, tooLarge) as WireMessage)
      }
    }
  }
}
