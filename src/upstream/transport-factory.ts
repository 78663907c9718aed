import { SSEClientTransport, type JSONRPCMessage, type Transport, type TransportSendOptions } from '@modelcontextprotocol/client'
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/client/stdio'
import type { UpstreamConfig } from '../config/schema.ts'
import type { UpstreamHttp } from './http-dispatcher.ts'
import { StreamableHttpTransport } from './streamable-http-transport.ts'

export interface TransportHooks {
  /** Receives each line the child writes to stderr (stdio upstreams only). */
  onStderr (line: string): void
}

/**
 * Hands responses on one macrotask after the messages before them. The SDK handles notifications a
 * tick later than responses, so without this a call's last progress notification can lose the race
 * against its result and be dropped.
 */
class ResponseAfterNotifications implements Transport {
  readonly #inner: Transport
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: Transport['onmessage']

  constructor (inner: Transport) {
    this.#inner = inner
    inner.onclose = () => this.onclose?.()
    inner.onerror = (error) => this.onerror?.(error)
    inner.onmessage = (message, extra) => {
      if ('id' in message && !('method' in message)) setImmediate(() => this.onmessage?.(message, extra))
      else this.onmessage?.(message, extra)
    }
  }

  get sessionId (): string | undefined {
    return this.#inner.sessionId
  }

  start (): Promise<void> {
    return this.#inner.start()
  }

  send (message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    return this.#inner.send(message, options)
  }

  close (): Promise<void> {
    return this.#inner.close()
  }

  setProtocolVersion (version: string): void {
    this.#inner.setProtocolVersion?.(version)
  }
}

function stdioTransport (config: Extract<UpstreamConfig, { transport: 'stdio' }>, hooks: TransportHooks): Transport {
  const transport = new StdioClientTransport({
    command: config.command,
    args: [...config.args],
    env: { ...getDefaultEnvironment(), ...config.env },
    ...(config.cwd !== undefined && { cwd: config.cwd }),
    stderr: 'pipe',
  })
  let pending = ''
  transport.stderr?.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8')
    let newline = pending.indexOf('\n')
    while (newline >= 0) {
      const line = pending.slice(0, newline).trimEnd()
      if (line !== '') hooks.onStderr(line)
      pending = pending.slice(newline + 1)
      newline = pending.indexOf('\n')
    }
  })
  return new ResponseAfterNotifications(transport)
}

/** The configured headers with the Authorization header (whatever its case) replaced by a caller's own. */
function withAuthorization (headers: Readonly<Record<string, string>>, authorization: string | undefined): Readonly<Record<string, string>> {
  if (authorization === undefined) return headers
  const others = Object.entries(headers).filter(([name]) => name.toLowerCase() !== 'authorization')
  return { ...Object.fromEntries(others), authorization }
}

/**
 * Builds a fresh client transport for one connection to the upstream; `authorization`, when given, is a
 * caller's own Authorization header, sent instead of the configured one (forwardAuthorization).
 */
export function createTransport (config: UpstreamConfig, http: UpstreamHttp | undefined, hooks: TransportHooks, authorization?: string): Transport {
  switch (config.transport) {
    case 'stdio':
      return stdioTransport(config, hooks)
    case 'streamable-http':
      if (!http) throw new Error(`upstream '${config.name}' has no HTTP pool`)
      return new StreamableHttpTransport({ url: new URL(config.url), dispatcher: http.dispatcher, headers: withAuthorization(config.headers, authorization) })
    case 'sse':
      return new ResponseAfterNotifications(new SSEClientTransport(new URL(config.url), {
        requestInit: { headers: { ...config.headers } },
        ...(http && { fetch: http.fetch }),
      }))
  }
}
