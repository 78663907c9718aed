import { Writable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { pino } from 'pino'
import { afterAll, beforeAll } from 'vitest'
import { parseConfig } from '../../src/config/load.ts'
import type { Config } from '../../src/config/schema.ts'
import { buildGateway, type Gateway, type GatewayOptions } from '../../src/gateway.ts'
import { loggerOptions } from '../../src/observability/logger.ts'
import { DEMO_MAIN } from './built.ts'

export interface RunningGateway {
  gateway: Gateway
  config: Config
  /** The gateway's Fastify app: `app.inject()` runs its routes and hooks without a socket. */
  app: FastifyInstance
  /** `http://127.0.0.1:<port>/mcp`; empty when started with `listen: false`. */
  url: string
  /** `http://127.0.0.1:<port>`; empty when started with `listen: false`. */
  base: string
  /** Every log line written so far, parsed. */
  logs: () => Array<Record<string, unknown>>
  close (): Promise<void>
}

/** The demo upstream over stdio, compiled (see built.ts). */
export function demoStdio (extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { name: 'demo', transport: 'stdio', command: process.execPath, args: [DEMO_MAIN], ...extra }
}

export interface StartOptions extends Pick<GatewayOptions, 'configSource' | 'store'> {
  /**
   * false: build the gateway without listening, for tests that reach it only through `app.inject()` (one HTTP
   * exchange's status, headers and body need no socket). Default true: a free loopback port.
   */
  listen?: boolean
}

/** Builds and starts a gateway on a free loopback port with a memory store and a captured log (`options`: more of buildGateway's). */
export async function startGateway (
  raw: Record<string, unknown>,
  env: Record<string, string> = {},
  options: StartOptions = {},
): Promise<RunningGateway> {
  const { listen = true, ...gatewayOptions } = options
  const input = { store: { kind: 'memory' }, ...raw, server: { port: 0, ...(raw.server as object | undefined) } }
  const config = parseConfig(input, env)
  const lines: string[] = []
  const sink = new Writable({
    write (chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''))
      done()
    },
  })
  const logger = pino({ ...loggerOptions({ ...config.logging, level: 'debug' }) }, sink)
  const gateway = await buildGateway(config, { ...gatewayOptions, logger })
  const address = listen ? await gateway.app.listen({ host: '127.0.0.1', port: 0 }) : ''
  // Tests start from every upstream's first connect ended (the gateway itself serves before that).
  await gateway.ready.catch(async (err: unknown) => {
    await gateway.close()
    throw err
  })
  return {
    gateway,
    config,
    app: gateway.app,
    base: address,
    url: listen ? `${address}${config.server.path}` : '',
    logs: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
    close: () => gateway.close(),
  }
}

/**
 * One gateway for the enclosing `describe` (started before its first test, closed after its last): returns it,
 * its fields filled in once it has started. Default: the demo upstream over stdio.
 */
export function gatewayForSuite (raw: Record<string, unknown> = { upstreams: [demoStdio()] }, options: StartOptions = {}): RunningGateway {
  const running = {} as RunningGateway
  beforeAll(async () => {
    Object.assign(running, await startGateway(raw, {}, options))
  })
  afterAll(async () => {
    await running.close?.()
  })
  return running
}
