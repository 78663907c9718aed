import { SSEClientTransport, type FetchLike, type Transport } from '@modelcontextprotocol/client'
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/client/stdio'
import type { UpstreamConfig } from '../config/schema.ts'
import type { UpstreamHttp } from './http-dispatcher.ts'
import { oneSendAtATime } from './one-send-at-a-time.ts'
import type { ResponseLimits } from './response-limit.ts'
import { limitedEventStreams } from './event-stream-limit.ts'
import { StdioLineReader } from './stdio-line-reader.ts'
import { ignoreWithTrace } from '../observability/ignored.ts'
import type { Logger } from '../observability/logger.ts'
import { StreamableHttpTransport, type StreamableHttpTransportOptions } from './streamable-http-transport.ts'
import { credentialedFetch, credentialedRequester, type SessionCredentials } from './credentials/credentialed-requests.ts'

export interface TransportHooks {
  /** Receives each line the child writes to stderr (stdio upstreams only). */
  onStderr (line: string): void
  /** How large the upstream's answers may be. */
  limits: ResponseLimits
  /** Where a transport closed for an answer over its limit is traced when the close fails. */
  log: Logger
}

export interface CreatedTransport {
  transport: Transport
  /** Whether responses must be handed on after the notifications before them (see AttributingTransport). */
  delayResponses: boolean
  /** The Streamable HTTP transport (it can leave its upstream session open when closed). */
  http?: StreamableHttpTransport
}

/** Longest part of a stderr line logged as one line. */
const STDERR_LINE_CHARS = 64 * 1024

function stdioTransport (config: Extract<UpstreamConfig, { transport: 'stdio' }>, hooks: TransportHooks): Transport {
  const transport = new StdioClientTransport({
    command: config.command,
    args: [...config.args],
    env: { ...getDefaultEnvironment(), ...config.env },
    ...(config.cwd !== undefined && { cwd: config.cwd }),
    stderr: 'pipe',
  })
  // The SDK's read buffer stops the process on a line over its limit, failing every call in flight as a lost connection.
  const sdk = transport as unknown as { _readBuffer?: unknown }
  if (!('_readBuffer' in sdk)) throw new Error('the SDK\'s StdioClientTransport has no _readBuffer to replace: check stdio-line-reader.ts against the SDK')
  sdk._readBuffer = new StdioLineReader(hooks.limits)
  oneSendAtATime(transport)
  let pending = ''
  transport.stderr?.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8')
    let start = 0
    for (let newline = text.indexOf('\n'); newline >= 0; newline = text.indexOf('\n', start)) {
      const line = (pending + text.slice(start, newline)).trimEnd()
      pending = ''
      if (line !== '') hooks.onStderr(line)
      start = newline + 1
    }
    // A line without end is logged in parts of at most STDERR_LINE_CHARS, never held whole.
    pending += text.slice(start)
    if (pending.length > STDERR_LINE_CHARS) {
      hooks.onStderr(pending)
      pending = ''
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
 * (Streamable HTTP only). `credentials`: every HTTP request of the session gets its headers from them.
 */
export function createTransport (
  config: UpstreamConfig,
  http: UpstreamHttp | undefined,
  hooks: TransportHooks,
  authorization?: string,
  rejoin?: StreamableHttpTransportOptions['rejoin'],
  credentials?: SessionCredentials,
): CreatedTransport {
  if (rejoin !== undefined && config.transport !== 'streamable-http') throw new Error(`upstream '${config.name}' has no sessions another process could use`)
  switch (config.transport) {
    case 'stdio':
      return { transport: stdioTransport(config, hooks), delayResponses: true }
    case 'streamable-http': {
      if (!http) throw new Error(`upstream '${config.name}' has no HTTP pool`)
      const transport = new StreamableHttpTransport({
        url: new URL(config.url),
        dispatcher: credentials === undefined ? http.dispatcher : credentialedRequester(http.dispatcher, credentials),
        headers: withAuthorization(config.headers, authorization),
        rejoin,
        limits: hooks.limits,
        log: hooks.log,
      })
      return { transport, delayResponses: false, http: transport }
    }
    case 'sse': {
      const base = http?.fetch ?? (fetch as FetchLike)
      const transport: SSEClientTransport = new SSEClientTransport(new URL(config.url), {
        requestInit: { headers: { ...config.headers } },
        fetch: limitedEventStreams(credentials === undefined ? base : credentialedFetch(base, credentials), hooks.limits, () => {
          transport.close().catch(ignoreWithTrace(hooks.log, 'closing an SSE transport after an answer over its limit failed; its request fails either way'))
        }),
      })
      return { transport, delayResponses: true }
    }
  }
}
