// upstreams[].credentials of kind oauth as written: defaults, every misuse at its YAML path (token exchange
// without auth.oauth, a secret given twice or not at all, a key option with a secret method), a client secret
// or key that cannot be read refuses the configuration without quoting it, and the options reach the library.
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { configWarnings } from '../../src/config/config-warnings.ts'
import { parseConfig, type ConfigProblem } from '../../src/config/load.ts'
import { GatewayError } from '../../src/errors.ts'
import { oauthOptions } from '../../src/upstream/credentials/oauth/oauth-config.ts'
import type { OAuthCredentialsConfig } from '../../src/config/credentials-schema.ts'

type Json = Record<string, unknown>

const OAUTH = { issuer: 'https://idp.example.com/', jwksUri: 'https://idp.example.com/jwks', resource: 'https://gateway.example.com/mcp' }
const TOKENS = { tokens: [{ principal: 'alice', sha256: 'a'.repeat(64), scopes: [] }] }
const SECRET = 'the-client-secret-never-quoted'

function upstream (credentials: Json, extra: Json = {}): Json {
  return { name: 'remote', transport: 'streamable-http', url: 'https://mcp.example.com/mcp', credentials, ...extra }
}

function problemsOf (raw: Json, env: Record<string, string> = {}): ConfigProblem[] {
  try {
    parseConfig(raw, env)
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError)
    return (err as GatewayError).data as ConfigProblem[]
  }
  throw new Error('the configuration was accepted')
}

describe('upstreams[].credentials kind oauth', () => {
  let dir: string
  let secretFile: string

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gw-oauth-config-'))
    secretFile = join(dir, 'client-secret')
    await writeFile(secretFile, `${SECRET}\n`)
    await chmod(secretFile, 0o600)
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it('takes client credentials with a secret from a file, with the library\'s defaults', () => {
    const config = parseConfig({ upstreams: [upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientSecretFile: secretFile, scope: 'mcp tools' })] }, {})
    const credentials = (config.upstreams[0] as Json).credentials as OAuthCredentialsConfig
    expect(credentials).toEqual({
      kind: 'oauth',
      grant: 'client_credentials',
      clientId: 'gateway',
      clientAuth: 'client_secret_basic',
      clientSecretFile: secretFile,
      scope: 'mcp tools',
      timeout: 10_000,
      refreshBefore: 30_000,
      retryBackoff: 1000,
      maxRetryBackoff: 30_000,
      maxCachedTokens: 10_000,
      gatewaySession: 'client_credentials',
    })
    expect(configWarnings(config)).toEqual([])
    expect(oauthOptions('remote', 'https://mcp.example.com/mcp', credentials)).toMatchObject({
      upstream: 'remote',
      url: 'https://mcp.example.com/mcp',
      clientId: 'gateway',
      clientAuth: { method: 'client_secret_basic', secretFile },
      scope: 'mcp tools',
      timeoutMs: 10_000,
      refreshSkewMs: 30_000,
      initialBackoffMs: 1000,
      maxBackoffMs: 30_000,
    })
  })

  it('takes a token exchange with auth.oauth, a secret from the environment, and a private key JWT', async () => {
    const keyFile = join(dir, 'key.jwk')
    await writeFile(keyFile, '{"kty":"EC"}')
    await chmod(keyFile, 0o600)
    const config = parseConfig({
      auth: { oauth: OAUTH },
      upstreams: [
        upstream({ kind: 'oauth', grant: 'token_exchange', clientId: 'gateway', clientAuth: 'client_secret_post', clientSecretEnv: 'REMOTE_SECRET', audience: 'remote-api' }),
        upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientAuth: 'private_key_jwt', privateKeyFile: keyFile, keyId: 'k1' }, { name: 'signed' }),
      ],
    }, { REMOTE_SECRET: SECRET })
    const [exchange, signed] = config.upstreams.map((u) => (u as Json).credentials as OAuthCredentialsConfig)
    expect(oauthOptions('remote', 'https://mcp.example.com/mcp', exchange!)).toMatchObject({ clientAuth: { method: 'client_secret_post', secretEnv: 'REMOTE_SECRET' }, audience: 'remote-api' })
    expect(oauthOptions('signed', 'https://mcp.example.com/mcp', signed!).clientAuth).toEqual({ method: 'private_key_jwt', keyFile, alg: undefined, kid: 'k1' })
    expect(JSON.stringify(config)).not.toContain(SECRET)
  })

  it('reports each misuse at its path', () => {
    const problems = problemsOf({
      auth: TOKENS,
      upstreams: [
        upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientSecretFile: secretFile }, { name: 'a' }),
        upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway' }, { name: 'b' }),
        upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientSecretFile: secretFile, clientSecretEnv: 'X' }, { name: 'c' }),
        upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientAuth: 'private_key_jwt', clientSecretEnv: 'X' }, { name: 'd' }),
        upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientSecretFile: secretFile, keyId: 'k', audience: 'x' }, { name: 'e' }),
        upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientSecret: SECRET }, { name: 'f' }),
        upstream({ kind: 'oauth', grant: 'password', clientId: 'gateway', clientSecretFile: secretFile }, { name: 'g' }),
      ],
    }, { X: 'x' })
    const at = (path: string): string | undefined => problems.find((p) => p.path === path)?.message
    expect(at('upstreams[1].credentials.clientAuth')).toMatch(/client_secret_basic needs the client secret from exactly one of clientSecretFile and clientSecretEnv/)
    expect(at('upstreams[2].credentials.clientAuth')).toMatch(/exactly one of/)
    expect(at('upstreams[3].credentials.privateKeyFile')).toMatch(/private_key_jwt needs the private key/)
    expect(at('upstreams[3].credentials.clientSecretEnv')).toMatch(/sends no client secret/)
    expect(at('upstreams[4].credentials.keyId')).toMatch(/is for clientAuth private_key_jwt/)
    expect(at('upstreams[4].credentials.audience')).toMatch(/a parameter of the token exchange/)
    expect(at('upstreams[5].credentials')).toMatch(/unknown option\(s\) 'clientSecret'/)
    expect(at('upstreams[6].credentials.grant')).toBeDefined()
    expect(JSON.stringify(problems)).not.toContain(SECRET)
    // What depends on the rest of the configuration is checked once each upstream is valid on its own.
    const combined = problemsOf({
      auth: TOKENS,
      upstreams: [
        upstream({ kind: 'oauth', grant: 'token_exchange', clientId: 'gateway', clientSecretFile: secretFile }, { name: 'a' }),
        upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientSecretFile: secretFile }, { name: 'h', forwardAuthorization: true }),
      ],
    })
    expect(combined).toEqual([
      { path: 'upstreams[0].credentials.grant', message: expect.stringMatching(/token_exchange exchanges the caller's own OAuth access token, which the gateway must validate: configure auth.oauth/) },
      { path: 'upstreams[1].forwardAuthorization', message: expect.stringMatching(/cannot be combined with credentials/) },
    ])
  })

  it('refuses a client secret or key that cannot be read, naming the option and never the secret', async () => {
    const empty = join(dir, 'empty-secret')
    await writeFile(empty, '\n')
    const problems = problemsOf({
      upstreams: [
        upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientSecretFile: join(dir, 'missing') }, { name: 'a' }),
        upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientSecretFile: empty }, { name: 'b' }),
        upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientSecretEnv: 'UNSET_SECRET' }, { name: 'c' }),
        upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientAuth: 'private_key_jwt', privateKeyFile: join(dir, 'no-key.pem') }, { name: 'd' }),
      ],
    })
    expect(problems).toEqual([
      { path: 'upstreams[0].credentials.clientSecretFile', message: expect.stringMatching(/cannot read the client secret file '.*missing': ENOENT/) },
      { path: 'upstreams[1].credentials.clientSecretFile', message: expect.stringMatching(/the client secret file '.*empty-secret' is empty/) },
      { path: 'upstreams[2].credentials.clientSecretEnv', message: 'the environment variable UNSET_SECRET is not set (or empty)' },
      { path: 'upstreams[3].credentials.privateKeyFile', message: expect.stringMatching(/cannot read the private key file '.*no-key.pem': ENOENT/) },
    ])
  })

  it('warns of a client secret file others may read', async () => {
    const open = join(dir, 'open-secret')
    await writeFile(open, SECRET)
    await chmod(open, 0o644)
    const config = parseConfig({ upstreams: [upstream({ kind: 'oauth', grant: 'client_credentials', clientId: 'gateway', clientSecretFile: open })] }, {})
    expect(configWarnings(config)).toEqual([
      { path: 'upstreams[0].credentials.clientSecretFile', message: expect.stringMatching(/may be read by other users than the gateway's .*chmod 600/) },
    ])
  })
})
