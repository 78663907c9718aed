import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { afterAll, describe, expect, it } from 'vitest'
import { connectV1, textOf } from '../helpers/clients.ts'
import { demoStdio, gatewayForSuite, type RunningGateway } from '../helpers/gateway.ts'
import { next, RawSession } from '../helpers/raw-session.ts'
import { until } from '../helpers/until.ts'

/** A guard against a hang, so that a connection the gateway never closes fails the test with a clear message; not a timing claim. */
const CLOSE_GUARD_MS = 30_000

/** Opens `count` TCP connections to the gateway from `localAddress` that send nothing; resolves once each connected or was closed. */
async function silentSockets (gw: RunningGateway, count: number, localAddress = '127.0.0.1'): Promise<Socket[]> {
  const { hostname, port } = new URL(gw.base)
  return await Promise.all(Array.from({ length: count }, async () => {
    const socket = connect({ host: hostname, port: Number(port), localAddress })
    socket.on('error', () => {})
    // Reads and drops what the gateway may answer before closing (a 408): a socket nobody reads never sees its end.
    socket.resume()
    await Promise.race([once(socket, 'connect'), once(socket, 'close')])
    return socket
  }))
}

function closed (socket: Socket): Promise<void> {
  return socket.closed ? Promise.resolve() : once(socket, 'close').then(() => {})
}

/** Resolves once every socket is closed; fails, naming how many are still open, if the gateway keeps any past the guard. */
async function allClosedByGateway (sockets: Socket[]): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const guard = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`the gateway kept ${sockets.filter((s) => !s.closed).length} of ${sockets.length} silent connections open for ${CLOSE_GUARD_MS} ms`)), CLOSE_GUARD_MS)
  })
  try {
    await Promise.race([Promise.all(sockets.map(closed)), guard])
  } finally {
    clearTimeout(timer)
  }
}

describe('connections that send nothing (limits.headersTimeout)', () => {
  const gw = gatewayForSuite({ limits: { headersTimeout: '1s' }, upstreams: [demoStdio()] })

  it('closes them once headersTimeout passes, while an SSE stream opened before them lives on', async () => {
    const session = await RawSession.open(gw.url)
    const stop = new AbortController()
    const stream = await session.stream('get', stop.signal)
    try {
      const sockets = await silentSockets(gw, 300)
      await allClosedByGateway(sockets)
      // The GET stream is older than every silent connection: it still carries what the session is told.
      await session.request('tools/call', { name: 'demo__toggle_extra_tool', arguments: {} })
      expect(await next(stream, (message) => message.method === 'notifications/tools/list_changed')).toMatchObject({ method: 'notifications/tools/list_changed' })
    } finally {
      stop.abort()
      await session.close()
    }
  }, 60_000)
})

describe('connections per client address (limits.connectionsPerIp)', () => {
  // Silent connections within the share stay for the whole test: only the share closes them.
  const gw = gatewayForSuite({ limits: { connectionsPerIp: 20, headersTimeout: '5m' }, upstreams: [demoStdio()] })

  it('closes the connections of one address beyond its share at once, and a client from another address still gets in', async () => {
    const sockets = await silentSockets(gw, 300, '127.0.0.2')
    try {
      await until('the connections beyond the share closed', () => sockets.filter((socket) => socket.closed).length >= 280 ? true : undefined, {
        describeLast: () => `: ${sockets.filter((socket) => socket.closed).length} of 300 closed`,
      })
      const client = await connectV1(gw.url)
      try {
        expect(textOf(await client.callTool({ name: 'demo__echo', arguments: { text: 'still served' } }))).toBe('still served')
      } finally {
        await client.close()
      }
      expect(sockets.filter((socket) => !socket.closed)).toHaveLength(20)
      // The log names the limit (once for the burst: warnings are spaced).
      expect(gw.logs().filter((line) => line.limit === 'limits.connectionsPerIp')).toEqual([expect.objectContaining({ address: '127.0.0.2', open: 20, refused: 1 })])
    } finally {
      for (const socket of sockets) socket.destroy()
    }
  }, 60_000)
})

describe('idle keep-alive connections (limits.keepAliveTimeout)', () => {
  const gw = gatewayForSuite({ limits: { keepAliveTimeout: '1s' }, upstreams: [demoStdio()] })

  it('closes a connection that answered its request and sends nothing more, and says so in Keep-Alive', async () => {
    const [socket] = await silentSockets(gw, 1)
    let received = ''
    socket!.setEncoding('utf8')
    socket!.on('data', (chunk: string) => { received += chunk })
    socket!.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
    await allClosedByGateway([socket!])
    expect(received).toMatch(/^HTTP\/1\.1 200/)
    expect(received).toMatch(/\r\nKeep-Alive: timeout=1\r\n/i)
  }, 60_000)
})

describe('connections that send nothing over HTTPS', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-silent-tls-'))
  const cert = join(dir, 'server.crt')
  const key = join(dir, 'server.key')
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-keyout', key, '-out', cert, '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ], { stdio: 'ignore' })
  const gw = gatewayForSuite({ limits: { headersTimeout: '1s' }, server: { tls: { cert, key } }, upstreams: [demoStdio()] })
  afterAll(() => { rmSync(dir, { recursive: true, force: true }) })

  it('closes one that never starts its TLS handshake and one that finishes it and sends nothing, after headersTimeout', async () => {
    const [plain] = await silentSockets(gw, 1)
    const { port } = new URL(gw.base)
    const secure = tlsConnect({ host: '127.0.0.1', port: Number(port), ca: readFileSync(cert) })
    secure.on('error', () => {})
    secure.resume()
    await once(secure, 'secureConnect')
    await allClosedByGateway([plain!, secure])
  }, 60_000)
})
