import { SSEClientTransport, StreamableHTTPClientTransport, type Transport } from '@modelcontextprotocol/client'
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/client/stdio'
import type { UpstreamConfig } from '../config/schema.ts'
import type { UpstreamHttp } from './http-dispatcher.ts'

export interface TransportHooks {
  /** Receives each line the child writes to stderr (stdio upstreams only). */
  onStderr (line: string): void
}

/** Builds a fresh SDK client transport for one connection to the upstream. */
export function createTransport (config: UpstreamConfig, http: UpstreamHttp | undefined, hooks: TransportHooks): Transport {
  switch (config.transport) {
    case 'stdio': {
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
      return transport
    }
    case 'streamable-http':
      return new StreamableHTTPClientTransport(new URL(config.url), {
        requestInit: { headers: { ...config.headers } },
        ...(http && { fetch: http.fetch }),
        reconnectionOptions: { maxRetries: 2, initialReconnectionDelay: 500, maxReconnectionDelay: 5000, reconnectionDelayGrowFactor: 2 },
      })
    case 'sse':
      return new SSEClientTransport(new URL(config.url), {
        requestInit: { headers: { ...config.headers } },
        ...(http && { fetch: http.fetch }),
      })
  }
}
