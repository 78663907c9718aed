import type { JSONRPCMessage } from '@modelcontextprotocol/client'
import { errorMessage } from '../errors.ts'
import type { StreamCursor } from './sse-stream-reader.ts'
import type { ReplayAnswer } from './stream-replay.ts'

/** How long to wait before reconnecting when the upstream asked for no time (`retry:`) of its own. */
export const DEFAULT_RECONNECT_MS = 1000
/** The longest wait before a reconnect, whatever the upstream asks: a call is not left idle for longer. */
export const MAX_RECONNECT_MS = 30_000
/** Reconnects in a row that may fail (no stream opened) before the request is failed. */
export const RESUME_ATTEMPTS = 5
/** Answers to a reconnect that say the stream cannot be resumed at all: the request is failed at once. */
const FINAL_STATUSES = new Set([400, 404, 405])

/**
 * Why a request's response stream, closed by the upstream before the answer, could not be resumed. It carries
 * no upstream name or request: `mapUpstreamError` makes it GW_ERR_UPSTREAM_CONNECTION_LOST, which names them.
 */
export class StreamResumeFailed extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'StreamResumeFailed'
  }
}

/**
 * The JSON-RPC error response that fails request `id` in the SDK client when its stream could not be resumed.
 * Handed to the SDK in this process only, never sent: its `data` is the error, which `mapUpstreamError` finds.
 */
export function resumeFailedResponse (id: string | number, failure: StreamResumeFailed): JSONRPCMessage {
  return { jsonrpc: '2.0', id, error: { code: -32603, message: failure.message, data: failure } } as unknown as JSONRPCMessage
}

/** The StreamResumeFailed an upstream request failed with, if that is what it failed with. */
export function streamResumeFailed (err: unknown): StreamResumeFailed | undefined {
  if (err instanceof StreamResumeFailed) return err
  const data = (err as { data?: unknown } | null | undefined)?.data
  return data instanceof StreamResumeFailed ? data : undefined
}

/** Resolves true after `ms`, or false as soon as `signal` aborts. */
function wait (ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false)
    const stop = (): void => {
      clearTimeout(timer)
      resolve(false)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', stop)
      resolve(true)
    }, ms)
    signal.addEventListener('abort', stop, { once: true })
  })
}

export interface StreamResumer {
  cursor: StreamCursor
  /** Aborted when nobody waits for the answer any more (the request was aborted, the transport closed). */
  signal: AbortSignal
  /** A GET for the events after `lastEventId` on the same session: the SSE body, or the status and text of a refusal. */
  open (lastEventId: string, signal: AbortSignal): Promise<ReplayAnswer>
  /** Reads a resumed stream to its end (or to the answer), moving the cursor on. */
  read (body: NonNullable<ReplayAnswer['body']>): Promise<void>
  fail (failure: StreamResumeFailed): void
}

/**
 * SSE polling (Streamable HTTP, 2025-11-25): an upstream may close a request's response stream once it has
 * sent an event id, and send the rest, the answer included, on the stream the client opens again with GET and
 * Last-Event-ID. This waits the time the upstream asked for (`retry:`, capped at MAX_RECONNECT_MS), reconnects
 * from the last event seen, reads on, and does so again each time the stream closes before the answer. A
 * reconnect that fails waits twice as long as the one before; after RESUME_ATTEMPTS of them in a row, or at
 * once when the upstream says the stream cannot be resumed (400, 404, 405), the request fails.
 */
export async function resumeUntilAnswered (resumer: StreamResumer): Promise<void> {
  const { cursor, signal } = resumer
  let failures = 0
  while (!cursor.answered && !signal.aborted && cursor.lastEventId !== undefined) {
    if (!await wait(Math.min((cursor.retryMs ?? DEFAULT_RECONNECT_MS) * 2 ** failures, MAX_RECONNECT_MS), signal)) return
    const from = cursor.lastEventId
    const unreached = (err: unknown): ReplayAnswer => ({ statusCode: 0, text: errorMessage(err), body: undefined })
    const answer = await resumer.open(from, signal).catch(unreached)
    if (signal.aborted) {
      answer.body?.destroy()
      return
    }
    if (answer.statusCode === 200 && answer.body !== undefined) {
      failures = 0
      await resumer.read(answer.body)
      continue
    }
    failures++
    const refusal = answer.statusCode === 0 ? answer.text : `HTTP ${answer.statusCode}: ${answer.text.slice(0, 200)}`
    if (FINAL_STATUSES.has(answer.statusCode)) {
      resumer.fail(new StreamResumeFailed(`it closed the response stream before answering, and refused to resume it from event '${from}' (GET with Last-Event-ID answered ${refusal})`))
      return
    }
    if (failures >= RESUME_ATTEMPTS) {
      resumer.fail(new StreamResumeFailed(`it closed the response stream before answering, and ${failures} attempts to resume it from event '${from}' (GET with Last-Event-ID) failed; the last: ${refusal}`))
      return
    }
  }
}
