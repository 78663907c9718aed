import { z } from 'zod'

/**
 * `upstreams[].credentials`: how the gateway authenticates itself to an HTTP upstream for each caller, never with
 * a token passed through from the caller (that is `forwardAuthorization`, which cannot be combined with it). One
 * variant per way, told apart by `kind`; each is one UpstreamCredentials implementation
 * (src/upstream/credentials/).
 */

const HEADER = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

const perPrincipalCredentials = z.strictObject({
  kind: z.literal('per-principal')
    .describe('a static key (an API key) per principal, from `file` and/or `env`; a principal without one does not see the upstream\'s tools, prompts and resources, and a call of one gets GW_ERR_UPSTREAM_NO_CREDENTIAL naming the upstream. Upstream sessions then serve one principal each. Needs auth (auth.tokens or auth.oauth): without it nobody is a principal'),
  header: z.string().regex(HEADER, 'must be an HTTP header name').prefault('authorization')
    .describe('the header the key is sent in (it replaces a header of that name in `headers` on the principal\'s requests)'),
  scheme: z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be one word, such as Bearer').optional()
    .describe('sent before the key with one space (`Bearer` sends `Bearer <key>`); default: the key alone'),
  file: z.string().min(1).optional()
    .describe('a YAML or JSON file mapping each principal to its key (`alice: <key>`), relative to the working directory; read at start and at each configuration reload (a rotated key is used from the next request on); keep it readable by the gateway only (a file others may read is warned about)'),
  env: z.record(z.string().min(1), z.string().regex(ENV_NAME, 'must be the name of an environment variable')).prefault({})
    .describe('principal → name of the environment variable holding its key (`alice: CRM_KEY_ALICE`); read at start and at each reload; a principal named here and in `file` takes the key from here'),
}).refine((credentials) => credentials.file !== undefined || Object.keys(credentials.env).length > 0, {
  message: 'give the keys in file, in env, or both',
  path: ['kind'],
})

export const upstreamCredentialsSchema = z.discriminatedUnion('kind', [
  perPrincipalCredentials,
  // kind: oauth (client credentials, token exchange) goes here.
]).describe('how the gateway authenticates to this upstream for each caller with a credential made for the upstream (never the caller\'s own token); see docs/security.md, Upstream credentials')

export type UpstreamCredentialsConfig = z.output<typeof upstreamCredentialsSchema>
export type PerPrincipalCredentialsConfig = Extract<UpstreamCredentialsConfig, { kind: 'per-principal' }>

interface CredentialsInConfig {
  auth: { tokens: readonly unknown[], oauth?: unknown }
  upstreams: ReadonlyArray<{ transport: string, credentials?: UpstreamCredentialsConfig | undefined, forwardAuthorization?: boolean }>
}

/** What `upstreams[].credentials` cannot be combined with, each with its YAML path. */
export function credentialsProblems (config: CredentialsInConfig): Array<{ path: Array<string | number>, message: string }> {
  const problems: Array<{ path: Array<string | number>, message: string }> = []
  const authOn = config.auth.tokens.length > 0 || config.auth.oauth !== undefined
  config.upstreams.forEach((upstream, index) => {
    if (upstream.credentials === undefined) return
    if (upstream.forwardAuthorization === true) {
      problems.push({ path: ['upstreams', index, 'forwardAuthorization'], message: 'cannot be combined with credentials: the upstream gets either a credential made for it or the caller\'s own Authorization header; remove one of them' })
    }
    if (upstream.credentials.kind === 'per-principal' && !authOn) {
      problems.push({ path: ['upstreams', index, 'credentials'], message: 'per-principal keys need callers who are principals: configure auth.tokens or auth.oauth (without auth nobody is a principal), or send one key to everyone in headers' })
    }
  })
  return problems
}
