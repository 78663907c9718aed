export interface SseEvent {
  id?: string
  event?: string
  data: string
}

/** Reads Server-Sent Events from a fetch response body, one at a time. */
export async function * readSse (body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder()
  let buffer = ''
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true })
    let end = buffer.indexOf('\n\n')
    while (end >= 0) {
      const block = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      end = buffer.indexOf('\n\n')
      const event: SseEvent = { data: '' }
      let hasField = false
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue
        const colon = line.indexOf(':')
        const field = colon < 0 ? line : line.slice(0, colon)
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'id') { event.id = value; hasField = true }
        if (field === 'event') { event.event = value; hasField = true }
        if (field === 'data') { event.data = event.data === '' ? value : `${event.data}\n${value}`; hasField = true }
      }
      if (hasField) yield event
    }
  }
}

export const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }

export async function initializeRaw (url: string, capabilities: Record<string, unknown> = {}): Promise<string> {
  const res = await fetch(url, {
    method: 'POST',
    headers: MCP_HEADERS,
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'raw', version: '1' } } }),
  })
  await res.text()
  const session = res.headers.get('mcp-session-id')
  if (!session) throw new Error(`initialize failed with HTTP ${res.status}`)
  return session
}
