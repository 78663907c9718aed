import { createServer } from 'node:net'
import { afterAll, describe, expect, it } from 'vitest'
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'

async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** An upstream that is down at start joins the catalog when it comes up; clients are told. */
describe('upstream reconnection', () => {
  let late: StartedUpstream | undefined
  let gw: RunningGateway | undefined

  afterAll(async () => {
    await gw?.close()
    await late?.close()
  })

  it('retries with backoff, adds the upstream\'s tools when it comes up and sends list_changed', async () => {
    const port = await freePort()
    gw = await startGateway({
      upstreams: [
        demoStdio(),
        { name: 'late', transport: 'streamable-http', url: `http://127.0.0.1:${port}/mcp`, restart: { initialDelay: '100ms', maxDelay: '400ms' } },
      ],
    })
    const client = await connectV1(gw.url)
    expect((await client.listTools()).tools.some((t) => t.name.startsWith('late__'))).toBe(false)
    const changed = new Promise<void>((resolve) => {
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve())
    })
    late = await startUpstream('test/fixtures/v1-http-upstream.ts', ['--port', String(port)])
    await changed
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('late__add')
    expect(textOf(await client.callTool({ name: 'late__add', arguments: { a: 1, b: 1 } }))).toBe('2')
    const ready = (await gw.gateway.app.inject({ url: '/readyz' })).json() as { status: string }
    expect(ready.status).toBe('ready')
    await client.close()
  })
})
