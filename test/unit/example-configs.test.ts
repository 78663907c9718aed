// Every configuration in examples/ loads as written, with the variables and files it says it reads: an example
// that a release made wrong fails here, not in an operator's hands.
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseConfigText } from '../../src/config/load.ts'

const EXAMPLES = fileURLToPath(new URL('../../examples/', import.meta.url))

/** What each example reads: its environment, and the secret files it names (written to a temporary directory). */
const NEEDS: Record<string, { env: Record<string, string>, files: Record<string, string> }> = {
  'remote-oauth.yaml': {
    env: {
      IDP_ISSUER: 'https://idp.example.com/',
      IDP_JWKS_URI: 'https://idp.example.com/.well-known/jwks.json',
      GATEWAY_PUBLIC_URL: 'https://mcp-gateway.example.com/mcp',
      TICKETS_CLIENT_SECRET: 'a-client-secret-from-the-environment',
      GATEWAY_STATE_SECRET: 'a-state-secret-of-at-least-32-characters',
    },
    files: { '/run/secrets/reports-client-key.pem': '-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n' },
  },
}

describe('examples/', () => {
  let dir: string
  beforeAll(async () => { dir = await mkdtemp(join(tmpdir(), 'gw-examples-')) })
  afterAll(async () => { await rm(dir, { recursive: true, force: true }) })

  it('holds configurations, each listed here with what it reads', async () => {
    const yaml = (await readdir(EXAMPLES)).filter((name) => name.endsWith('.yaml'))
    expect(yaml.length).toBeGreaterThan(0)
    expect(yaml.sort()).toEqual(Object.keys(NEEDS).sort())
  })

  it.each(Object.keys(NEEDS))('%s loads as written', async (name) => {
    const { env, files } = NEEDS[name]!
    let text = await readFile(join(EXAMPLES, name), 'utf8')
    // The secret files it names live under /run/secrets in a deployment; here under a temporary directory.
    for (const [path, content] of Object.entries(files)) {
      const local = join(dir, path.replaceAll('/', '_'))
      await writeFile(local, content, { mode: 0o600 })
      text = text.replaceAll(path, local)
    }
    const config = parseConfigText(text, env)
    const credentials = config.upstreams.map((u) => (u as { credentials?: { kind: string, grant?: string } }).credentials)
    expect(credentials.map((c) => `${c?.kind}:${c?.grant}`)).toEqual(['oauth:token_exchange', 'oauth:client_credentials'])
  })
})
