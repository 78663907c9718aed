import { describe, expect, it } from 'vitest'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { textOf } from '../helpers/clients.ts'
import { gatewayForSuite } from '../helpers/gateway.ts'
import { ModernRaw, TASKS_EXT } from '../helpers/modern-raw.ts'
import { readSse } from '../helpers/sse.ts'

type Json = Record<string, unknown>

/** The 2026-07-28 era at the same endpoint: envelope, headers, discovery and MRTR for synchronous calls. */
describe('2026-07-28 clients', () => {
  const gw = gatewayForSuite()

  it('discover the gateway, with the tasks extension and caching hints', async () => {
    const result = await new ModernRaw(gw.url).result('server/discover')
    expect(result).toMatchObject({
      resultType: 'complete',
      supportedVersions: ['2026-07-28'],
      capabilities: { tools: { listChanged: true }, extensions: { [TASKS_EXT]: {} } },
      ttlMs: 60_000,
      _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'mcp-task-gateway' } },
    })
    const tools = await new ModernRaw(gw.url).result('tools/list')
    expect(tools).toMatchObject({ resultType: 'complete', ttlMs: 60_000, cacheScope: 'public' })
    // What a client with capabilities lists may be its own (servers list some tools only for capable clients).
    expect(await new ModernRaw(gw.url, { elicitation: { form: {} } }).result('tools/list')).toMatchObject({ cacheScope: 'private' })
  })

  it('work with the v2 SDK client in 2026 mode, input requests answered through MRTR', async () => {
    const client = new Client({ name: 'v2-modern', version: '1' }, { capabilities: { elicitation: { form: {} }, sampling: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } })
    client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Modern Ada' } }))
    client.setRequestHandler('sampling/createMessage', async () => ({ role: 'assistant', model: 'm', content: { type: 'text', text: 'modern summary' } }))
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.url)))
    expect(client.getProtocolEra()).toBe('modern')
    expect(textOf(await client.callTool({ name: 'demo__echo', arguments: { text: 'hi' } }))).toBe('hi')
    expect(textOf(await client.callTool({ name: 'demo__ask_user', arguments: {} }))).toContain('Modern Ada')
    expect(textOf(await client.callTool({ name: 'demo__summarize', arguments: { text: 'x' } }))).toContain('modern summary')
    const prompt = await client.getPrompt({ name: 'demo__greeting', arguments: { name: 'Zed' } })
    expect(JSON.stringify(prompt.messages)).toContain('Zed')
    await client.close()
  })

  it('resume the same upstream call with inputResponses and the signed requestState', async () => {
    const client = new ModernRaw(gw.url, { elicitation: { form: {} } })
    const first = await client.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Name?' } })
    expect(first.resultType).toBe('input_required')
    const [key, request] = Object.entries(first.inputRequests as Json)[0]!
    expect(request).toMatchObject({ method: 'elicitation/create', params: { message: 'Name?' } })
    const second = await client.result('tools/call', { name: 'demo__ask_user', arguments: { message: 'Name?' }, inputResponses: { [key]: { action: 'accept', content: { name: 'Retry' } } }, requestState: first.requestState })
    expect(second).toMatchObject({ resultType: 'complete', content: [{ text: 'Hello, Retry!' }] })
  })

  it('refuse a forged requestState and only send input the request declared', async () => {
    const client = new ModernRaw(gw.url, { elicitation: { form: {} } })
    const first = await client.result('tools/call', { name: 'demo__ask_user', arguments: {} })
    const state = String(first.requestState)
    const forged = await client.request('tools/call', { name: 'demo__ask_user', arguments: {}, inputResponses: {}, requestState: `${state.slice(0, -2)}AA` })
    expect(forged.body.error).toMatchObject({ code: -32602, message: expect.stringContaining('requestState') })
    const noCapability = await new ModernRaw(gw.url, {}).result('tools/call', { name: 'demo__ask_user', arguments: {} })
    expect(noCapability).toMatchObject({ resultType: 'complete', isError: true })
  })

  it('check the routing headers and the envelope (HTTP 400)', async () => {
    const client = new ModernRaw(gw.url)
    const wrongName = await client.request('tools/call', { name: 'demo__echo', arguments: { text: 'x' } }, { 'mcp-name': 'demo__slow' })
    expect(wrongName.status).toBe(400)
    expect(wrongName.body.error).toMatchObject({ code: -32020 })
    const noMethod = await client.request('tools/list', {}, { 'mcp-method': undefined })
    expect(noMethod.status).toBe(400)
    expect((noMethod.body.error as Json).code).toBe(-32020)
    const wrongVersion = await client.request('tools/list', {}, { 'mcp-protocol-version': '2025-11-25' })
    expect(wrongVersion.status).toBe(400)
    const res = await fetch(gw.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2027-01-01', 'mcp-method': 'tools/list' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2027-01-01', 'io.modelcontextprotocol/clientCapabilities': {} } } }),
    })
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: Json }).error).toMatchObject({ code: -32022, data: { supported: ['2026-07-28'] } })
  })

  it('deliver resource updates and list changes on a subscriptions/listen stream', async () => {
    const client = new ModernRaw(gw.url)
    const controller = new AbortController()
    const res = await fetch(gw.url, {
      method: 'POST',
      signal: controller.signal,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'listen-1', method: 'subscriptions/listen', params: client.envelope({ notifications: { resourceSubscriptions: ['demo://readme'], toolsListChanged: true } }) }),
    })
    const events = readSse(res.body!)
    // events.next() by hand: leaving a for-await loop would close the stream.
    const next = async (method: string): Promise<Json> => {
      for (;;) {
        const { value, done } = await events.next()
        if (done) throw new Error(`the stream ended before ${method}`)
        if (value.data === '') continue
        const message = JSON.parse(value.data) as Json
        if (message.method === method) return message
      }
    }
    expect((await next('notifications/subscriptions/acknowledged')).params).toMatchObject({ notifications: { resourceSubscriptions: ['demo://readme'], toolsListChanged: true } })
    await client.result('tools/call', { name: 'demo__touch_resource', arguments: { uri: 'demo://readme' } })
    expect((await next('notifications/resources/updated')).params).toMatchObject({ uri: 'demo://readme', _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen-1' } })
    await client.result('tools/call', { name: 'demo__toggle_extra_tool', arguments: {} })
    expect((await next('notifications/tools/list_changed')).params).toMatchObject({ _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen-1' } })
    controller.abort()
  })
})
