import { describe, expect, it } from 'vitest'
import { gatewayForSuite } from '../helpers/gateway.ts'
import { MCP_HEADERS, initializeRaw, readSse, type SseEvent } from '../helpers/sse.ts'

/** SSE behaviour of the endpoint: streamed responses, resumption with Last-Event-ID, GET streams. */
describe('SSE streams', () => {
  const gw = gatewayForSuite()

  it('answers a call that sends progress as an SSE stream with event ids, ending with the result', async () => {
    const session = await initializeRaw(gw.url)
    const res = await fetch(gw.url, {
      method: 'POST',
      headers: { ...MCP_HEADERS, 'mcp-session-id': session },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'demo__slow', arguments: { duration: 30, steps: 3 }, _meta: { progressToken: 'tok' } } }),
    })
    expect(res.headers.get('content-type')).toBe('text/event-stream')
    const events: SseEvent[] = []
    for await (const event of readSse(res.body!)) events.push(event)
    const messages = events.filter((e) => e.data !== '').map((e) => JSON.parse(e.data) as Record<string, unknown>)
    expect(messages.at(-1)).toMatchObject({ id: 7, result: { content: [{ type: 'text' }] } })
    expect(messages.slice(0, -1).every((m) => m.method === 'notifications/progress')).toBe(true)
    expect(events.every((e) => e.id !== undefined)).toBe(true)
  })

  it('resumes a dropped response stream on GET with Last-Event-ID, replaying what was missed', async () => {
    const session = await initializeRaw(gw.url)
    const controller = new AbortController()
    const res = await fetch(gw.url, {
      method: 'POST',
      signal: controller.signal,
      headers: { ...MCP_HEADERS, 'mcp-session-id': session },
      body: JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'demo__slow', arguments: { duration: 600, steps: 6 }, _meta: { progressToken: 'p' } } }),
    })
    let lastId: string | undefined
    for await (const event of readSse(res.body!)) {
      if (event.data !== '') {
        lastId = event.id
        break
      }
    }
    controller.abort()
    expect(lastId).toBeDefined()
    const resumed = await fetch(gw.url, { headers: { accept: 'text/event-stream', 'mcp-session-id': session, 'last-event-id': lastId! } })
    const messages: Array<Record<string, unknown>> = []
    for await (const event of readSse(resumed.body!)) {
      if (event.data !== '') messages.push(JSON.parse(event.data) as Record<string, unknown>)
    }
    const progress = messages.filter((m) => m.method === 'notifications/progress').map((m) => (m.params as { progress: number }).progress)
    expect(progress[0]).toBe(2)
    expect(messages.at(-1)).toMatchObject({ id: 8, result: { content: [{ text: expect.stringContaining('6 steps') }] } })
  })

  it('opens a GET stream for server-initiated messages and requires the session', async () => {
    const noSession = await fetch(gw.url, { headers: { accept: 'text/event-stream' } })
    expect(noSession.status).toBe(400)
    const session = await initializeRaw(gw.url)
    const controller = new AbortController()
    const res = await fetch(gw.url, { signal: controller.signal, headers: { accept: 'text/event-stream', 'mcp-session-id': session } })
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('text/event-stream')
    const first = await readSse(res.body!).next()
    expect(first.value?.id).toMatch(/:0$/)
    controller.abort()
  })
})
