/**
 * Where a call's SSE response stream can be replayed from (Streamable HTTP resumability): the JSON-RPC id the
 * call went out with and an event id of its stream. The SDK passes it through opaquely (`onresumptiontoken`,
 * `resumptionToken`); the gateway stores it with the task (TaskResume of kind `stream`).
 */
export interface StreamPosition {
  /** The call's id on the wire (a number, or a string for a process that rejoined the session). */
  requestId: string | number
  /** The event to replay after (Last-Event-ID). */
  eventId: string
}

export function encodeResumptionToken (position: StreamPosition): string {
  return JSON.stringify([position.requestId, position.eventId])
}

/** The position a token names; undefined for a token this gateway did not make. */
export function decodeResumptionToken (token: string): StreamPosition | undefined {
  try {
    const parsed = JSON.parse(token) as unknown
    if (!Array.isArray(parsed) || parsed.length !== 2) return undefined
    const [requestId, eventId] = parsed as unknown[]
    if ((typeof requestId !== 'string' && typeof requestId !== 'number') || typeof eventId !== 'string') return undefined
    return { requestId, eventId }
  } catch {
    return undefined
  }
}
