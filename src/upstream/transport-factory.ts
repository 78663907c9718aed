import { SSEClientTransport, type Transport } from '@modelcontextprotocol/client'
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/client/stdio'
import type { UpstreamConfig } from '../config/schema.ts'
import type { UpstreamHttp } from './http-dispatcher.ts'
import { oneSendAtATime } from './one-send-at-a-time.ts'
import type { ResponseLimits } from './response-limit.ts'
import { StreamableHttpTransport, type StreamableHttpTransportOptions } from './streamable-http-transport.ts'

export interface TransportHooks {
  /** Receives each line the child writes to stderr (stdio upstreams only). */
  onStderr (line: string): void
  /** How large the upstream's answers may be. */
  limits: ResponseLimits
}

export interface CreatedTransport {
  transport: Transport
  /** Whether responses must be handed on after the notifications before them (see AttributingTransport). */
  delayResponses: boolean
  /** The Streamable HTTP transport (it can leave its upstream session open when closed). */
  http?: StreamableHttpTransport
}

function stdioTransport (config: Extract<UpstreamConfig, { transport: 'stdio' }>, hooks: TransportHooks): Transport {
  const transport = new StdioClientTransport({
    command: config.command,
    args: [...config.args],
    env: { ...getDefaultEnvironment(), ...config.env },
    ...(config.cwd !== undefined && { cwd: config.cwd }),
    stderr: 'pipe',
  })
  oneSendAtATime(transport)
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
  return transport
}

/** The configured headers with the Authorization header (whatever its case) replaced by a caller's own. */
function withAuthorization (
  headers: Readonly<Record<string, string>>,
  authorization: string | undefined,
): Readonly<Record<string, string>> {
  if (authorization === undefined) return headers
  const others = Object.entries(headers).filter(([name]) => name.toLowerCase() !== 'authorization')
  return { ...Object.fromEntries(others), authorization }
}

/**
 * Builds a fresh client transport for one upstream session. `authorization`, when given, is the caller's
 * own Authorization header, sent instead of the configured one (forwardAuthorization, Streamable HTTP
 * only); each later request may carry its caller's own again. `rejoin`: an existing upstream session to use
 * (Streamable HTTP only).
 */
export function createTransport (
  config: UpstreamConfig,
  http: UpstreamHttp | undefined,
  hooks: TransportHooks,
  authorization?: string,
  rejoin?: StreamableHttpTransportOptions['rejoin'],
): CreatedTransport {
  if (rejoin !== undefined && config.transport !== 'streamable-http') throw new Error(`upstream '${config.name}' has no sessions another process could use`)
  switch (config.transport) {
    case 'stdio':
      return { transport: stdioTransport(config, hooks), delayResponses: true }
    case 'streamable-http': {
      if (!http) throw new Error(`upstream '${config.name}' has no HTTP pool`)
      const transport = new StreamableHttpTransport({
        url: new URL(config.url),
        dispatcher: http.dispatcher,
        headers: withAuthorization(config.headers, authorization),
        rejoin,
        limits: hooks.limits,
      })
      return { transport, delayResponses: false, http: transport }
    }
    case 'sse':
      return {
        transport: new SSEClientTransport(new URL(config.url), {
          requestInit: { headers: { ...config.headers } },
          ...(http && { fetch: http.fetch }),
        }),
        delayResponses: true,
      }
  }
}
