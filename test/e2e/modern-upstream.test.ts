import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { ResourceUpdatedNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'
import { runTask } from '../helpers/tasks.ts'

type Json = Record<string, unknown>

/**
 * An upstream that speaks only the 2026-07-28 protocol (v2 SDK, MRTR). The gateway talks to it in that
 * era and turns its input_required rounds into whatever the downstream client understands.
 */
describe('a 2026-07-28 upstream', () => {
  let upstream: StartedUpstream
  let gw: RunningGateway
  let legacyClient: Client

  beforeAll(async () => {
    upstream = await startUpstream('test/fixtures/modern-upstream.ts', ['--port', '0'])
    gw = await startGateway({ upstreams: [{ name: 'm', transport: 'streamable-http', url: upstream.url, era: 'auto' }], tasks: { pollInterval: '50ms' } })
    legacyClient = await connectV1(gw.url, { onElicit: () => ({ action: 'accept', content: { name: 'Legacy Lee' } }) })
  })

  afterAll(async () => {
    await legacyClient?.close()
    await gw?.close()
    await upstream?.close()
  })

  it('is spoken to in the modern era', async () => {
    expect(textOf(await legacyClient.callTool({ name: 'm__era', arguments: {} }))).toBe('modern')
    expect(textOf(await legacyClient.callTool({ name: 'm__greet', arguments: { name: 'Ann' } }))).toContain('Ann')
  })

  it('asks a legacy client live, on the call\'s stream, when the upstream returns input_required', async () => {
    expect(textOf(await legacyClient.callTool({ name: 'm__ask', arguments: { question: 'Who?' } }))).toBe('modern upstream heard: Legacy Lee')
  })

  it('queues the upstream\'s input for a legacy task', async () => {
    const outcome = await runTask(legacyClient, 'm__ask', {})
    expect(textOf(outcome.result)).toBe('modern upstream heard: Legacy Lee')
  })

  it('passes the input on to a modern client as its own input_required round', async () => {
    const client = new ModernRaw(gw.url, { elicitation: { form: {} } })
    const first = await client.result('tools/call', { name: 'm__ask', arguments: { question: 'Modern who?' } })
    expect(first.resultType).toBe('input_required')
    const [key, request] = Object.entries(first.inputRequests as Json)[0]!
    expect(request).toMatchObject({ method: 'elicitation/create', params: { message: 'Modern who?' } })
    const second = await client.result('tools/call', { name: 'm__ask', arguments: {}, inputResponses: { [key]: { action: 'accept', content: { name: 'Mo' } } }, requestState: first.requestState })
    expect(second).toMatchObject({ resultType: 'complete', content: [{ text: 'modern upstream heard: Mo' }] })
  })

  it('relays the upstream\'s -32021 to a 2026-07-28 client with HTTP 400, the status the spec gives that code', async () => {
    const reply = await new ModernRaw(gw.url, {}).request('tools/call', { name: 'm__needs_sampling', arguments: {} })
    expect(reply.body.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { sampling: {} } } })
    expect(reply.status).toBe(400)
    const allowed = await new ModernRaw(gw.url, { sampling: {} }).request('tools/call', { name: 'm__needs_sampling', arguments: {} })
    expect(allowed.status).toBe(200)
    expect(allowed.body.result).toMatchObject({ content: [{ text: 'sampling declared' }] })
  })

  it('keeps a client\'s session when the upstream sends something odd on a call\'s stream', async () => {
    const client = await connectV1(gw.url, { capabilities: { sampling: {} }, onSample: () => ({ role: 'assistant', content: { type: 'text', text: 'unused' }, model: 'none' }) })
    expect(textOf(await client.callTool({ name: 'm__stray_progress', arguments: {} }))).toBe('progress sent')
    // The odd message makes the gateway check that the session is alive: a 2026-07-28 upstream has no ping.
    const verdict = (): string[] => gw.logs().filter((line) => line.upstream === 'm' && ['upstream session closed', 'upstream answered its aliveness check; session kept'].includes(String(line.msg))).map((line) => String(line.msg))
    await vi.waitFor(() => { expect(verdict()).not.toEqual([]) }, { timeout: 10_000, interval: 20 })
    expect(verdict()).toEqual(['upstream answered its aliveness check; session kept'])
    expect(textOf(await client.callTool({ name: 'm__greet', arguments: { name: 'again' } }))).toContain('again')
    await client.close()
  })

  it('takes a result without resultType as complete, warns once per upstream and counts it in /readyz', async () => {
    expect(textOf(await legacyClient.callTool({ name: 'm__bare', arguments: {} }))).toBe('bare result')
    const modern = await new ModernRaw(gw.url, {}).result('tools/call', { name: 'm__bare', arguments: {} })
    expect(modern).toMatchObject({ resultType: 'complete', content: [{ text: 'bare result' }] })
    const warnings = gw.logs().filter((line) => line.upstream === 'm' && String(line.msg).includes('resultType'))
    expect(warnings).toHaveLength(1)
    const ready = await (await fetch(`${gw.base}/readyz`)).json() as { upstreams: Json[] }
    expect(ready.upstreams.find((u) => u.name === 'm')).toMatchObject({ resultsWithoutResultType: 2 })
  })

  it('tells clients of a list change the upstream announces on its subscriptions/listen stream', async () => {
    // caller gets its own upstream session by calling; watcher only lists (what new sessions list).
    const caller = await connectV1(gw.url, { capabilities: {} })
    const watcher = await connectV1(gw.url, { capabilities: { roots: {} } })
    const heard = { caller: 0, watcher: 0 }
    caller.setNotificationHandler(ToolListChangedNotificationSchema, () => { heard.caller++ })
    watcher.setNotificationHandler(ToolListChangedNotificationSchema, () => { heard.watcher++ })
    expect((await watcher.listTools()).tools.map((t) => t.name)).not.toContain('m__added')
    expect(textOf(await caller.callTool({ name: 'm__add_tool', arguments: {} }))).toBe('added')
    await vi.waitFor(() => { expect(heard).toEqual({ caller: 1, watcher: 1 }) }, { timeout: 10_000, interval: 20 })
    for (const client of [caller, watcher]) expect((await client.listTools()).tools.map((t) => t.name)).toContain('m__added')
    await caller.close()
    await watcher.close()
  })

  it('turns a 2025 client\'s resources/subscribe into a subscription on the upstream\'s listen stream', async () => {
    const client = await connectV1(gw.url, { capabilities: {} })
    const updates: string[] = []
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updates.push(n.params.uri) })
    await client.subscribeResource({ uri: 'note://current' })
    expect(textOf(await client.callTool({ name: 'm__touch_note', arguments: { text: 'second' } }))).toBe('touched')
    await vi.waitFor(() => { expect(updates).toEqual(['note://current']) }, { timeout: 10_000, interval: 20 })
    const read = await client.readResource({ uri: 'note://current' })
    expect(read.contents[0]).toMatchObject({ text: 'second' })
    await client.unsubscribeResource({ uri: 'note://current' })
    await client.close()
  })
})

/**
 * The conformance suite's reference server answers subscriptions/listen with an application/json body that
 * it writes one message per line and never ends: the gateway reads each line as it comes.
 */
describe('a 2026-07-28 upstream that answers subscriptions/listen as JSON lines', () => {
  let upstream: StartedUpstream
  let gw: RunningGateway

  beforeAll(async () => {
    upstream = await startUpstream('test/fixtures/modern-upstream.ts', ['--port', '0', '--json-lines-listen'])
    gw = await startGateway({ upstreams: [{ name: 'm', transport: 'streamable-http', url: upstream.url }] })
  })

  afterAll(async () => {
    await gw?.close()
    await upstream?.close()
  })

  it('tells clients of the list changes that arrive on it', async () => {
    const caller = await connectV1(gw.url, { capabilities: {} })
    const watcher = await connectV1(gw.url, { capabilities: { roots: {} } })
    const heard = { caller: 0, watcher: 0 }
    caller.setNotificationHandler(ToolListChangedNotificationSchema, () => { heard.caller++ })
    watcher.setNotificationHandler(ToolListChangedNotificationSchema, () => { heard.watcher++ })
    expect(textOf(await caller.callTool({ name: 'm__add_tool', arguments: {} }))).toBe('added')
    await vi.waitFor(() => { expect(heard).toEqual({ caller: 1, watcher: 1 }) }, { timeout: 10_000, interval: 20 })
    expect((await watcher.listTools()).tools.map((t) => t.name)).toContain('m__added')
    await caller.close()
    await watcher.close()
  })

  it('opens a listen stream again when the upstream ends it, and hears the next change on it', async () => {
    const watcher = await connectV1(gw.url, { capabilities: { roots: {} } })
    let heard = 0
    watcher.setNotificationHandler(ToolListChangedNotificationSchema, () => { heard++ })
    const opened = (): number => Math.max(0, ...[...upstream.stderr().matchAll(/listen opened (\d+)/g)].map((m) => Number(m[1])))
    const before = opened()
    expect(textOf(await watcher.callTool({ name: 'm__end_listens', arguments: {} }))).toBe('ended')
    // Every session's stream ended: the gateway's own and the watcher's both open theirs again.
    await vi.waitFor(() => { expect(opened()).toBeGreaterThanOrEqual(before + 2) }, { timeout: 10_000, interval: 20 })
    expect(textOf(await watcher.callTool({ name: 'm__add_tool', arguments: {} }))).toBe('added')
    await vi.waitFor(() => { expect(heard).toBe(1) }, { timeout: 10_000, interval: 20 })
    await watcher.close()
  })
})
