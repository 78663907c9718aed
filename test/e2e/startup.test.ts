// Start-up: the gateway answers at once while upstreams still connect, /readyz names the ones that are not
// ready yet, lists and calls wait for an upstream's first connect; a connect that times out names the option.
import { createServer, request, type Server } from 'node:http'
import { once } from 'node:events'
import { Writable } from 'node:stream'
import { afterEach, describe, expect, it } from 'vitest'
import { pino } from 'pino'
import { parseConfig } from '../../src/config/load.ts'
import { buildGateway, type Gateway } from '../../src/gateway.ts'
import { loggerOptions } from '../../src/observability/logger.ts'
import { startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'
import { connectV1, textOf } from '../helpers/clients.ts'
import { demoStdio } from '../helpers/gateway.ts'
import { ModernRaw } from '../helpers/modern-raw.ts'

interface Held {
  url: string
  /** Resolves when the first request arrived (and is being held). */
  arrived: Promise<void>
  /** Lets every held and later request through to the target. */
  release (): void
  close (): Promise<void>
}

/** A proxy in front of `target` that holds every request until `release()`: an upstream that is slow to connect. */
async function heldProxy (target: URL): Promise<Held> {
  let release!: () => void
  const gate = new Promise<void>((resolve) => { release = resolve })
  let arrived!: () => void
  const first = new Promise<void>((resolve) => { arrived = resolve })
  const server: Server = createServer((req, res) => {
    arrived()
    void gate.then(() => {
      const headers = { ...req.headers, host: target.host }
      const forward = request(target, { method: req.method, headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      })
      forward.on('error', () => res.destroy())
      req.pipe(forward)
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    arrived: first,
    release,
    close: async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

function silentLogger (lines: string[]): pino.Logger {
  const sink = new Writable({
    write (chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''))
      done()
    },
  })
  return pino(loggerOptions({ level: 'debug', redactHeaders: [] }), sink)
}

describe('start-up', () => {
  let gateway: Gateway | undefined
  let upstream: StartedUpstream | undefined
  let held: Held | undefined

  afterEach(async () => {
    held?.release()
    await gateway?.close()
    await held?.close()
    await upstream?.close()
    gateway = undefined
    held = undefined
    upstream = undefined
  })

  it('answers /healthz and /readyz while an upstream still connects, and lists and initialize wait for its first connect', async () => {
    upstream = await startUpstream('test/fixtures/v1-http-upstream.ts', ['--port', '0'])
    held = await heldProxy(new URL(upstream.url))
    const config = parseConfig({
      store: { kind: 'memory' },
      server: { port: 0 },
      upstreams: [demoStdio(), { name: 'late', transport: 'streamable-http', url: held.url, timeouts: { connect: '25s' } }],
    })
    gateway = await buildGateway(config, { logger: silentLogger([]) })
    const address = await gateway.app.listen({ host: '127.0.0.1', port: 0 })
    await held.arrived

    expect((await gateway.app.inject({ url: '/healthz' })).statusCode).toBe(200)
    const readyz = (await gateway.app.inject({ url: '/readyz' })).json<{ upstreams: Array<{ name: string, state: string, reason?: string }> }>()
    expect(readyz.upstreams.find((u) => u.name === 'late')).toMatchObject({ state: 'starting', reason: expect.stringContaining('connecting') })

    // initialize waits for it too: what it announces is what the upstreams offer (the late one has logging).
    const connecting = connectV1(`${address}/mcp`)
    const listed = new ModernRaw(`${address}/mcp`).result('tools/list')
    held.release()
    const names = ((await listed).tools as Array<{ name: string }>).map((t) => t.name)
    expect(names).toEqual(expect.arrayContaining(['demo__echo', 'late__add']))
    const client = await connecting
    expect(client.getServerCapabilities()?.logging).toEqual({})
    expect(textOf(await client.callTool({ name: 'late__add', arguments: { a: 2, b: 3 } }))).toBe('5')
    await client.close()
  })

  it('says starting on /readyz while no upstream has finished its first connect, and closes without waiting for it', async () => {
    held = await heldProxy(new URL('http://127.0.0.1:9/mcp'))
    const config = parseConfig({
      store: { kind: 'memory' },
      upstreams: [{ name: 'late', transport: 'streamable-http', url: held.url, timeouts: { connect: '10m' } }],
    })
    gateway = await buildGateway(config, { logger: silentLogger([]) })
    await held.arrived
    const readyz = await gateway.app.inject({ url: '/readyz' })
    expect(readyz.statusCode).toBe(503)
    expect(readyz.json()).toMatchObject({ status: 'starting', upstreams: [{ name: 'late', state: 'starting', reason: expect.stringContaining('10m: timeouts.connect') }] })
    await gateway.close()
    await gateway.ready
    expect(gateway.upstreams[0]!.state).toBe('closed')
  })

  it('names timeouts.connect and its value when an upstream does not finish its handshake in time', async () => {
    const lines: string[] = []
    const config = parseConfig({
      store: { kind: 'memory' },
      upstreams: [
        demoStdio(),
        // Starts and reads stdin, but never answers the handshake.
        { name: 'mute', transport: 'stdio', command: process.execPath, args: ['-e', 'process.stdin.resume()'], timeouts: { connect: '700ms' }, restart: { initialDelay: '1h' } },
      ],
    })
    gateway = await buildGateway(config, { logger: silentLogger(lines) })
    await gateway.ready
    const mute = gateway.upstreams.find((u) => u.name === 'mute')!
    expect(mute.state).toBe('down')
    expect(mute.lastError).toContain('timeouts.connect')
    expect(mute.lastError).toContain('700ms')
    expect(lines.some((l) => l.includes('timeouts.connect') && l.includes('"upstream":"mute"'))).toBe(true)
  })
})
