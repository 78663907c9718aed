import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { toNodeHandler } from '@modelcontextprotocol/node'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server'
import { createRemoteJWKSet, decodeJwt, jwtVerify } from 'jose'

export interface OAuthUpstreamOptions {
  issuer: string
  jwksUri: string
  /**
   * Where its protected resource metadata is served: `well-known` (the RFC 9728 path of its URL) or `hidden` (a
   * path only its 401's `resource_metadata` names).
   */
  metadataAt: 'well-known' | 'hidden'
}

/** What a token the upstream accepted said. */
export interface AcceptedToken {
  sub: string
  aud: string | string[] | undefined
}

/**
 * An MCP server (SDK v2) over Streamable HTTP that takes only tokens made for it, as the MCP authorization spec
 * asks: a request without a valid token gets 401 with `WWW-Authenticate: Bearer resource_metadata="…"`; a token
 * must be signed by the authorization server (its JWKS) and have this server's URL as audience. Its tool
 * `whoami` answers with the token's `sub`; `hold` does too, once the test releases it.
 */
export class OAuthUpstream {
  readonly #http: Server
  readonly #options: OAuthUpstreamOptions
  url = ''
  metadataUrl = ''
  /** While set, its metadata claims to be about this resource instead of its own URL. */
  claimedResource: string | undefined
  readonly accepted: AcceptedToken[] = []
  /** Requests turned away with 401, with the reason. */
  readonly refused: string[] = []
  /** The subjects of the `hold` calls that reached it, in order. */
  readonly held: string[] = []
  #release!: () => void
  #released = new Promise<void>((resolve) => { this.#release = resolve })

  constructor (options: OAuthUpstreamOptions) {
    this.#options = options
    const jwks = createRemoteJWKSet(new URL(options.jwksUri))
    const mcp = toNodeHandler(createMcpHandler(({ requestInfo }) => {
      const server = new McpServer({ name: 'oauth-upstream', version: '1.0.0' }, { capabilities: { tools: {} } })
      server.registerTool('whoami', { description: 'the subject of the access token this request came with' }, async () => {
        const token = (requestInfo?.headers.get('authorization') ?? '').slice('Bearer '.length)
        return { content: [{ type: 'text', text: String(decodeJwt(token).sub) }] }
      })
      server.registerTool('hold', { description: 'answers with the token\'s subject once the test releases it' }, async () => {
        const sub = String(decodeJwt((requestInfo?.headers.get('authorization') ?? '').slice('Bearer '.length)).sub)
        this.held.push(sub)
        await this.#released
        return { content: [{ type: 'text', text: sub }] }
      })
      return server
    }))
    this.#http = createServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://upstream').pathname
      if (path === new URL(this.metadataUrl).pathname) {
        res.writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ resource: this.claimedResource ?? this.url, authorization_servers: [options.issuer], bearer_methods_supported: ['header'] }))
        return
      }
      if (path !== '/mcp') {
        res.writeHead(404).end()
        return
      }
      const header = req.headers.authorization ?? ''
      const challenge = (error?: string): void => {
        this.refused.push(error ?? 'no token')
        const params = [`resource_metadata="${this.metadataUrl}"`, ...(error === undefined ? [] : ['error="invalid_token"'])]
        res.writeHead(401, { 'www-authenticate': `Bearer ${params.join(', ')}` }).end()
      }
      if (!header.startsWith('Bearer ')) {
        challenge()
        return
      }
      jwtVerify(header.slice('Bearer '.length), jwks, { issuer: options.issuer, audience: this.url }).then(({ payload }) => {
        this.accepted.push({ sub: String(payload.sub), aud: payload.aud })
        mcp(req, res).catch(() => res.destroy())
      }, (err: unknown) => { challenge(err instanceof Error ? err.message : String(err)) })
    })
  }

  async start (): Promise<void> {
    this.#http.listen(0, '127.0.0.1')
    await once(this.#http, 'listening')
    const base = `http://127.0.0.1:${(this.#http.address() as AddressInfo).port}`
    this.url = `${base}/mcp`
    this.metadataUrl = this.#options.metadataAt === 'well-known'
      ? `${base}/.well-known/oauth-protected-resource/mcp`
      : `${base}/about/this-resource.json`
  }

  /** Lets every `hold` call, running or to come, answer. */
  release (): void {
    this.#release()
  }

  async stop (): Promise<void> {
    this.release()
    this.#http.closeAllConnections()
    this.#http.close()
    await once(this.#http, 'close')
  }
}

/** Calls `whoami` on `url` with an SDK client whose requests carry `headers`; the upstream's answer. */
export async function whoami (url: string, headers: Readonly<Record<string, string>>): Promise<string> {
  const client = new Client({ name: 'oauth-test', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { ...headers } } }))
  try {
    const result = await client.callTool({ name: 'whoami', arguments: {} })
    const first = (result.content as Array<{ type: string, text?: string }>)[0]
    return first?.text ?? ''
  } finally {
    await client.close()
  }
}
