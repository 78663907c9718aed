import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fixture } from '../helpers/built.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { gatewayForSuite } from '../helpers/gateway.ts'
import { legacyTask, RawSession } from '../helpers/raw-session.ts'
import { until } from '../helpers/until.ts'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'

const FIXTURE = 'test/fixtures/large-answer-upstream.ts'
/** What `stream` answers with when nobody stops it: far more than any limit below. */
const STREAMED = 64 * 1024 * 1024

interface StreamReport { streams: number, open: number, closedEarly: number, bytes: number }

async function report (client: Client, tool: string): Promise<StreamReport> {
  return JSON.parse(textOf(await client.callTool({ name: tool, arguments: {} }))) as StreamReport
}

/** The upstream closed the streamed answer it was writing before its end, with less than half of it written. */
async function closedEarly (client: Client, tool: string, before: StreamReport): Promise<void> {
  const after = await until('the streamed answer closed', async () => {
    const now = await report(client, tool)
    return now.open === 0 && now.closedEarly > before.closedEarly ? now : undefined
  })
  expect(after.bytes - before.bytes).toBeLessThan(STREAMED / 2)
}

describe('large answers of Streamable HTTP upstreams', () => {
  let sse: StartedUpstream
  let json: StartedUpstream
  const upstreams: Array<Record<string, unknown>> = []
  beforeAll(async () => {
    [sse, json] = await Promise.all([startUpstream(FIXTURE, ['--port', '0']), startUpstream(FIXTURE, ['--port', '0', '--json'])])
    upstreams.push(
      { name: 'wide', transport: 'streamable-http', url: sse.url, era: 'legacy' },
      { name: 'narrow', transport: 'streamable-http', url: sse.url, era: 'legacy', maxResponseBytes: '1mb' },
      { name: 'narrowjson', transport: 'streamable-http', url: json.url, era: 'legacy', maxResponseBytes: '1mb' },
    )
  })
  afterAll(async () => { await Promise.all([sse?.close(), json?.close()]) })
  const gw = gatewayForSuite({ upstreams, tasks: { maxResultBytes: '2mb' } })
  let client: Client
  beforeAll(async () => { client = await connectV1(gw.url) })
  afterAll(async () => { await client?.close() })

  it('passes a 30 MB answer through whole under the default maxResponseBytes', async () => {
    const result = await client.callTool({ name: 'wide__big', arguments: { bytes: 30_000_000 } })
    expect(textOf(result)).toHaveLength(30_000_000)
  })

  for (const [tool, body] of [['narrow', 'an SSE event'], ['narrowjson', 'a JSON body']] as const) {
    it(`fails an answer over maxResponseBytes (${body}) with an error naming the upstream and the option, closing it before its end; the session goes on`, async () => {
      const before = await report(client, `${tool}__stream_report`)
      await expect(client.callTool({ name: `${tool}__stream`, arguments: { bytes: STREAMED } })).rejects.toMatchObject({
        code: -32063,
        message: expect.stringMatching(new RegExp(`upstream '${tool}' answered tools/call 'stream' with more than 1048576 bytes \\(upstreams\\[\\]\\.maxResponseBytes\\)`)),
      })
      await closedEarly(client, `${tool}__stream_report`, before)
      expect(textOf(await client.callTool({ name: `${tool}__small`, arguments: {} }))).toBe('ok')
      expect(gw.logs().some((line) => String(line.msg).startsWith('upstream answer over maxResponseBytes'))).toBe(true)
    })
  }

  it('drops a message over maxResponseBytes on the standalone stream, logging it, and opens the stream again', async () => {
    const opened = Number(textOf(await client.callTool({ name: 'narrow__streams', arguments: {} })))
    const logged = (): number => gw.logs().filter((line) => String(line.msg).startsWith('upstream answer over maxResponseBytes') && line.requestId === undefined).length
    const before = logged()
    expect(textOf(await client.callTool({ name: 'narrow__shout', arguments: { bytes: 2 * 1024 * 1024 } }))).toBe('ok')
    await until('the dropped message logged', () => logged() > before ? true : undefined)
    await until('the standalone stream opened again', async () => Number(textOf(await client.callTool({ name: 'narrow__streams', arguments: {} }))) > opened ? true : undefined)
    expect(textOf(await client.callTool({ name: 'narrow__small', arguments: {} }))).toBe('ok')
  })

  it('fails a task whose answer passes tasks.maxResultBytes as it arrives, closing the answer before its end', async () => {
    const before = await report(client, 'wide__stream_report')
    const session = await RawSession.open(gw.url)
    const task = await legacyTask(session, 'wide__stream', { bytes: STREAMED })
    expect(await session.waitFor(task, ['completed', 'failed'])).toMatchObject({ status: 'failed', statusMessage: expect.stringContaining('tasks.maxResultBytes') })
    const error = (await session.request('tasks/result', { taskId: task })).error
    expect(error).toMatchObject({ code: -32060, message: expect.stringMatching(/result of more than \d+ bytes is over the 2097152 bytes .*\(tasks\.maxResultBytes\)/) })
    await closedEarly(client, 'wide__stream_report', before)
  })
})

describe('large answers of stdio upstreams', () => {
  const stdio = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> =>
    ({ name, transport: 'stdio', command: process.execPath, args: [fixture('large-answer-upstream')], ...extra })
  const gw = gatewayForSuite({ upstreams: [stdio('wide'), stdio('narrow', { maxResponseBytes: '1mb' })] })
  let client: Client
  beforeAll(async () => { client = await connectV1(gw.url) })
  afterAll(async () => { await client?.close() })

  it('passes a 12 MB line through whole under the default maxResponseBytes', async () => {
    const result = await client.callTool({ name: 'wide__big', arguments: { bytes: 12_000_000 } })
    expect(textOf(result)).toHaveLength(12_000_000)
  })

  it('fails a line over maxResponseBytes with an error naming the upstream and the option, and logs it; the same process answers next', async () => {
    const pid = textOf(await client.callTool({ name: 'narrow__pid', arguments: {} }))
    await expect(client.callTool({ name: 'narrow__big', arguments: { bytes: 3_000_000 } })).rejects.toMatchObject({
      code: -32063,
      message: expect.stringMatching(/upstream 'narrow' answered tools\/call 'big' with more than 1048576 bytes \(upstreams\[\]\.maxResponseBytes\)/),
    })
    expect(gw.logs().some((line) => String(line.msg).startsWith('upstream answer over maxResponseBytes'))).toBe(true)
    expect(textOf(await client.callTool({ name: 'narrow__small', arguments: {} }))).toBe('ok')
    expect(textOf(await client.callTool({ name: 'narrow__pid', arguments: {} }))).toBe(pid)
  })
})

describe('large answers of legacy HTTP+SSE upstreams', () => {
  let upstream: StartedUpstream
  const upstreams: Array<Record<string, unknown>> = []
  beforeAll(async () => {
    upstream = await startUpstream('test/fixtures/legacy-sse-upstream.ts', ['--port', '0'], { path: '/sse' })
    upstreams.push({ name: 'old', transport: 'sse', url: upstream.url, maxResponseBytes: '1mb' })
  })
  afterAll(async () => { await upstream?.close() })
  const gw = gatewayForSuite({ upstreams })
  let client: Client
  beforeAll(async () => { client = await connectV1(gw.url) })
  afterAll(async () => { await client?.close() })

  it('closes the event stream at an answer over maxResponseBytes, failing the calls waiting on it and logging why; the next call gets a new session', async () => {
    await expect(client.callTool({ name: 'old__echo', arguments: { text: 'x'.repeat(2 * 1024 * 1024) } })).rejects.toMatchObject({ code: -32051 })
    expect(gw.logs().some((line) => String(line.msg).startsWith('upstream answer over maxResponseBytes'))).toBe(true)
    const answer = await until('a new session of the upstream', async () => await client.callTool({ name: 'old__echo', arguments: { text: 'small' } }).catch(() => undefined))
    expect(textOf(answer)).toBe('small')
  })
})
