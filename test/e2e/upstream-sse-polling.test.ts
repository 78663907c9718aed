import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { afterEach, describe, expect, it } from 'vitest'
import { connectV1, textOf } from '../helpers/clients.ts'
import { startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { startPollingUpstream, type PollingUpstream, type PollingUpstreamOptions } from '../helpers/polling-upstream.ts'
import { runTask } from '../helpers/tasks.ts'
import { until } from '../helpers/until.ts'

const RETRY_MS = 200

let upstream: PollingUpstream | undefined
let gateway: RunningGateway | undefined
let client: Client | undefined

afterEach(async () => {
  await client?.close()
  await gateway?.close()
  await upstream?.close()
  client = gateway = upstream = undefined
})

async function through (options: PollingUpstreamOptions = { retryMs: RETRY_MS }): Promise<{ upstream: PollingUpstream, client: Client }> {
  upstream = await startPollingUpstream(options)
  gateway = await startGateway({ upstreams: [{ name: 'polling', transport: 'streamable-http', url: upstream.url, prefix: '' }] })
  client = await connectV1(gateway.url)
  return { upstream, client }
}

/** The POST of each `tools/call` and the GETs that resumed a stream, in the order they arrived. */
function callTraffic (up: PollingUpstream): PollingUpstream['requests'] {
  return up.requests.filter((r) => r.rpc === 'tools/call' || (r.method === 'GET' && r.lastEventId !== undefined))
}

describe('an upstream that closes a call\'s stream mid-call (SSE polling)', () => {
  it('the call gets its answer from the stream resumed with Last-Event-ID on the same session, after the retry the upstream asked for', async () => {
    const { upstream: up, client: c } = await through()
    const result = await c.callTool({ name: 'test_reconnection', arguments: {} })
    expect(textOf(result)).toBe('Reconnection test completed successfully.')

    const [post, resume, ...more] = callTraffic(up)
    expect(more).toEqual([])
    expect(post).toMatchObject({ method: 'POST', rpc: 'tools/call' })
    expect(resume).toMatchObject({ method: 'GET', sessionId: post!.sessionId })
    expect(resume!.lastEventId).toMatch(/::/)
    // The gateway opened no other upstream session to go on.
    expect(up.requests.slice(up.requests.indexOf(post!)).filter((r) => r.rpc === 'initialize')).toEqual([])
    // A timer never fires before its time (the few ms allowed are the clocks' rounding).
    const closedAt = up.closed[0]!.at
    expect(resume!.at - closedAt).toBeGreaterThanOrEqual(RETRY_MS - 2)
  })

  it('a call whose stream is closed again after each reconnect is resumed each time from its newest event, with its progress', async () => {
    const { upstream: up, client: c } = await through()
    const progress: number[] = []
    const result = await c.callTool({ name: 'poll_steps', arguments: { steps: 3 } }, undefined, { onprogress: (p) => { progress.push(p.progress) } })
    expect(textOf(result)).toBe('answered after 3 reconnects')
    expect(progress).toEqual([1, 2, 3])

    const resumes = callTraffic(up).filter((r) => r.method === 'GET')
    expect(resumes).toHaveLength(3)
    const ids = resumes.map((r) => r.lastEventId!)
    expect(new Set(ids).size).toBe(3)
    expect([...ids].sort()).toEqual(ids)
    for (const [i, resume] of resumes.entries()) expect(resume.at - up.closed[i]!.at).toBeGreaterThanOrEqual(RETRY_MS - 2)
  })

  it('a task whose upstream call stream is closed mid-call completes with the answer of the resumed stream', async () => {
    const { client: c } = await through()
    const outcome = await runTask(c, 'test_reconnection', {})
    expect(outcome.error).toBeUndefined()
    expect(textOf(outcome.result)).toBe('Reconnection test completed successfully.')
  })

  it('a call cancelled while its stream is resumed stops reading it and reconnects no more', async () => {
    const { upstream: up, client: c } = await through({ retryMs: 20 })
    const abort = new AbortController()
    const call = c.callTool({ name: 'hold', arguments: {} }, undefined, { signal: abort.signal }).catch((err: unknown) => err)
    const resume = await until('the first reconnect', () => callTraffic(up).find((r) => r.method === 'GET'))
    abort.abort(new Error('the user gave up'))
    await call
    // The gateway closes the resumed stream when the call is cancelled upstream (before, it read on for as long as it stayed open).
    await resume.ended
    const resumes = callTraffic(up).filter((r) => r.method === 'GET')
    expect(resumes).toHaveLength(1)
  })

  it('an upstream that refuses every reconnect fails the call with a connection-lost error naming the attempts, after a bounded number of them', async () => {
    const { upstream: up, client: c } = await through({ retryMs: 20, refuseResume: 503 })
    const error = await c.callTool({ name: 'test_reconnection', arguments: {} }).then(() => undefined, (err: unknown) => err as { code?: number, message: string })
    expect(error?.code).toBe(-32051)
    expect(error?.message).toMatch(/closed the response stream.*5 attempts to resume it.*HTTP 503/)
    expect(callTraffic(up).filter((r) => r.method === 'GET')).toHaveLength(5)
  })

  it('an upstream that no longer knows the stream (404) fails the call at once', async () => {
    const { upstream: up, client: c } = await through({ retryMs: 20, refuseResume: 404 })
    const error = await c.callTool({ name: 'test_reconnection', arguments: {} }).then(() => undefined, (err: unknown) => err as { code?: number, message: string })
    expect(error?.code).toBe(-32051)
    expect(error?.message).toMatch(/closed the response stream.*HTTP 404/)
    expect(callTraffic(up).filter((r) => r.method === 'GET')).toHaveLength(1)
  })
})
