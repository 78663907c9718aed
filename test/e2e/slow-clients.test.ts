import { once } from 'node:events'
import { connect, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { demoStdio, gatewayForSuite, type RunningGateway, startGateway } from '../helpers/gateway.ts'
import { RawSession } from '../helpers/raw-session.ts'
import { until } from '../helpers/until.ts'

/** Opens a raw TCP connection to the gateway; resolves once connected. */
async function open (gw: RunningGateway): Promise<Socket> {
  const { hostname, port } = new URL(gw.base)
  const socket = connect({ host: hostname, port: Number(port) })
  socket.setEncoding('utf8')
  await once(socket, 'connect')
  return socket
}

/** Resolves with everything the server sent once it closes the connection, and how long that took. */
async function closedByServer (socket: Socket, bound: number): Promise<{ received: string, afterMs: number }> {
  const started = Date.now()
  let received = ''
  socket.on('data', (chunk: string) => { received += chunk })
  const timer = setTimeout(() => socket.destroy(new Error(`the gateway kept the connection open for ${bound} ms`)), bound)
  try {
    await once(socket, 'close')
  } finally {
    clearTimeout(timer)
  }
  if (socket.errored) throw socket.errored
  return { received, afterMs: Date.now() - started }
}

describe('slow and abusive connections', () => {
  const gw = gatewayForSuite({
    limits: { headersTimeout: '500ms', requestTimeout: '1s' },
    upstreams: [demoStdio()],
  })

  it('closes a connection whose headers never finish (limits.headersTimeout)', async () => {
    const socket = await open(gw)
    socket.write('POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n')
    const { afterMs } = await closedByServer(socket, 10_000)
    // The behaviour is a duration: closed once the 500 ms of limits.headersTimeout are up, not at once. A lower
    // bound only (a loaded machine only makes it later), with room for a timer's coarseness; the 10 s above is far
    // from it, and guards against a connection never closed.
    expect(afterMs).toBeGreaterThanOrEqual(400)
  })

  it('answers 408 and closes a connection whose body never arrives (limits.requestTimeout)', async () => {
    const socket = await open(gw)
    socket.write('POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{"jsonrpc":')
    const { received } = await closedByServer(socket, 10_000)
    expect(received).toMatch(/^HTTP\/1\.1 408/)
  })

  it('refuses connections beyond limits.maxConnections and accepts again once some close', async () => {
    const small = await startGateway({ limits: { maxConnections: 3 }, upstreams: [demoStdio()] })
    const server = small.gateway.app.server
    const counted = async (): Promise<number> => await new Promise<number>((resolve) => server.getConnections((_err, n) => resolve(n)))
    const held: Socket[] = []
    for (let i = 0; i < 3; i++) held.push(await open(small))
    await until('the gateway to count three connections', async () => await counted() === 3 || undefined)
    // The fourth is closed by the gateway (read, so that its end is seen), and the three stay counted: events, not a wait.
    const fourth = await open(small)
    fourth.resume()
    if (!fourth.closed) await once(fourth, 'close')
    expect(await counted(), 'the three held connections are still open').toBe(3)
    expect(held.filter((socket) => socket.closed)).toEqual([])
    for (const socket of held) socket.destroy()
    await Promise.all(held.map((socket) => socket.closed ? Promise.resolve() : once(socket, 'close')))
    // The gateway sees the closes a moment later: wait (bounded) until it counts no connection.
    await until('the gateway to count no connection', async () => await counted() === 0 || undefined)
    const session = await RawSession.open(small.url)
    expect((await session.request('ping')).result).toEqual({})
    await session.close()
    await small.close()
  })
})
