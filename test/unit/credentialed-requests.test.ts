// The seam between an upstream's credentials and its HTTP requests: each request is sent with the headers the
// credentials give for its subject, asked per request; a 401 is reported, and retried once only when the
// credentials say a new credential may do better.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Agent } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { credentialedRequester } from '../../src/upstream/credentials/credentialed-requests.ts'
import type { CredentialSubject, UpstreamAuthHeaders, UpstreamCredentials } from '../../src/upstream/credentials/upstream-credentials.ts'

/** Credentials that hand out `token-<n>` and move to the next token when told the current one was refused. */
class CountingCredentials implements UpstreamCredentials {
  readonly sharing = 'principal'
  current = 1
  readonly asked: CredentialSubject[] = []
  readonly refused: Array<string | undefined> = []
  /** Whether a refused credential is replaced (else rejected answers false). */
  renews = true

  async headersFor (subject: CredentialSubject): Promise<UpstreamAuthHeaders> {
    this.asked.push(subject)
    return { headers: { authorization: `Bearer token-${this.current}` } }
  }

  rejected (_subject: CredentialSubject, _sent: UpstreamAuthHeaders, wwwAuthenticate: string | undefined): boolean {
    this.refused.push(wwwAuthenticate)
    if (!this.renews) return false
    this.current++
    return true
  }

  async close (): Promise<void> {}
}

describe('credentialedRequester', () => {
  let server: Server
  let origin: string
  const agent = new Agent()
  /** The tokens the server lets in, and the Authorization header of every request it saw. */
  const valid = new Set<string>()
  const seen: string[] = []

  beforeAll(async () => {
    server = createServer((req, res) => {
      const auth = req.headers.authorization ?? ''
      seen.push(auth)
      req.resume()
      if (!valid.has(auth)) {
        res.writeHead(401, { 'www-authenticate': 'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"' }).end('no')
        return
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    await agent.close()
    await new Promise((resolve) => { server.closeAllConnections(); server.close(resolve) })
  })

  const post = async (credentials: CountingCredentials, headers: Record<string, string> = {}): Promise<number> => {
    const requester = credentialedRequester(agent, { credentials, subject: { principal: 'alice' } })
    const res = await requester.request({ origin, path: '/mcp', method: 'POST', headers, body: '{"jsonrpc":"2.0"}' })
    await res.body.dump()
    return res.statusCode
  }

  it('sends the credential\'s header in place of a configured one of the same name, asked per request', async () => {
    valid.clear()
    valid.add('Bearer token-1')
    seen.length = 0
    const credentials = new CountingCredentials()
    expect(await post(credentials, { Authorization: 'Bearer configured', 'x-other': '1' })).toBe(200)
    expect(await post(credentials)).toBe(200)
    expect(seen).toEqual(['Bearer token-1', 'Bearer token-1'])
    expect(credentials.asked).toEqual([{ principal: 'alice' }, { principal: 'alice' }])
  })

  it('on a 401, reports it with WWW-Authenticate and sends the request once more with the new credential', async () => {
    valid.clear()
    valid.add('Bearer token-2')
    seen.length = 0
    const credentials = new CountingCredentials()
    expect(await post(credentials)).toBe(200)
    expect(seen).toEqual(['Bearer token-1', 'Bearer token-2'])
    expect(credentials.refused).toEqual(['Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"'])
  })

  it('answers the 401 when the credentials have nothing better, and never retries twice', async () => {
    valid.clear()
    seen.length = 0
    const stuck = new CountingCredentials()
    stuck.renews = false
    expect(await post(stuck)).toBe(401)
    expect(seen).toHaveLength(1)
    const renewing = new CountingCredentials()
    expect(await post(renewing)).toBe(401)
    expect(seen).toHaveLength(3)
  })
})
