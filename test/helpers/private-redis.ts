import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { Redis } from 'ioredis'
import { until } from './until.ts'

/** A TCP port nobody listens on now. */
export async function freePort (): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  server.close()
  await once(server, 'close')
  return port
}

export interface PrivateRedis {
  server: ChildProcess
  client: Redis
  url: string
  port: number
}

/**
 * A Redis of the test's own (no persistence, 2 MB of memory under `policy`) and a client of it. `port` reuses a
 * port (a restart of the same server); `password` makes it want one (`--requirepass`), which `url` then carries;
 * `args` are further redis-server options (`--dir` for where BGSAVE writes).
 */
export async function privateRedis (policy = 'noeviction', port?: number, password?: string, args: string[] = []): Promise<PrivateRedis> {
  port ??= await freePort()
  const auth = password === undefined ? [] : ['--requirepass', password]
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--maxmemory', '2mb', '--maxmemory-policy', policy, ...auth, ...args], { stdio: 'ignore' })
  const url = `redis://${password === undefined ? '' : `:${encodeURIComponent(password)}@`}127.0.0.1:${port}`
  const client = new Redis(url, { lazyConnect: true, retryStrategy: () => 50 })
  client.on('error', () => {})
  await until('the private Redis answers', async () => await client.ping().catch(() => undefined))
  return { server, client, url, port }
}

export async function stopRedis (redis: { server: ChildProcess, client: Redis } | undefined): Promise<void> {
  if (redis === undefined) return
  redis.client.disconnect()
  if (redis.server.exitCode === null) {
    redis.server.kill('SIGTERM')
    await once(redis.server, 'exit')
  }
}
