import type { FetchLike } from '@modelcontextprotocol/client'
import { limitFor, type ResponseLimits } from './response-limit.ts'
import { SseParser } from './sse-parser.ts'

/**
 * The `fetch` of a legacy HTTP+SSE upstream session, holding its event stream to maxResponseBytes: every
 * answer of such a session comes on its one GET stream, which the SDK's transport reads whole, event by event.
 * Each event is counted as it arrives (the same parser as Streamable HTTP's, linear in the stream); one that
 * passes the limit errors the stream there, so it is never held, and `onTooLarge` is told (the session is
 * closed: the answer cannot be told apart from the rest of the stream, and the legacy protocol has no way to
 * resume it, so the calls waiting on the session fail as a lost connection). POSTs pass untouched.
 */
export function limitedEventStreams (fetch: FetchLike, limits: ResponseLimits, onTooLarge: () => void): FetchLike {
  return async (url, init) => {
    const response = await fetch(url, init)
    const type = response.headers.get('content-type') ?? ''
    if (init?.method === 'POST' || response.status !== 200 || response.body === null || !type.includes('text/event-stream')) return response
    const limit = limitFor(limits, undefined)
    let failed = false
    let fail: (err: Error) => void = () => {}
    const parser = new SseParser(() => {}, {
      maxEventBytes: limit.bytes,
      onTooLarge: (seen) => {
        const tooLarge = limit.exceeded(seen)
        limits.onTooLarge?.(tooLarge, undefined)
        fail(tooLarge)
      },
    })
    const counted = response.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
      start (controller) {
        fail = (err) => {
          failed = true
          controller.error(err)
          onTooLarge()
        }
      },
      transform (chunk, controller) {
        if (failed) return
        parser.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))
        if (!failed) controller.enqueue(chunk)
      },
    }))
    return new Response(counted, { status: response.status, statusText: response.statusText, headers: response.headers })
  }
}
