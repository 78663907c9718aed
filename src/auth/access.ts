import type { AuthConfig } from '../config/schema.ts'
import { compileFilter } from '../config/name-filter.ts'
import { GatewayError } from '../errors.ts'

/**
 * What one caller may use. With no `auth.permissions` every caller may use everything; otherwise an
 * upstream's prompts and resources need a scope granting the upstream, and a tool needs a scope granting
 * its upstream or the tool itself (by the name clients see). What a caller may not use is neither listed
 * nor callable: it looks exactly like something that does not exist.
 */
export interface Access {
  /** True when nothing is withheld (lists need no filtering). */
  readonly all: boolean
  /** A key naming this set of grants, for caching what it filters. */
  readonly key: string
  upstream (name: string): boolean
  tool (upstream: string, exposedName: string): boolean
  /**
   * Why the caller may not use an upstream it is otherwise granted (it has no credential for it): a name of it
   * is then answered with this error, not as unknown. Undefined for an upstream it may use, or may not see at all.
   */
  refusal? (upstream: string): Error | undefined
}

/**
 * The credential a request authenticated with, as the exchanges it opens remember it (see HeldExchanges):
 * a fingerprint of the token, never the token itself.
 */
export interface Credential {
  /** `token`: a static token of `auth.tokens`; `oauth`: an access token of `auth.oauth`. */
  readonly kind: 'token' | 'oauth'
  /** The SHA-256 (hex) of the token, as `auth.tokens` holds it. */
  readonly sha256: string
  /** The scopes it carried when it was checked. */
  readonly scopes: readonly string[]
  /** When an access token's `exp` passes (ms since the epoch); undefined for a static token. */
  readonly expiresAt: number | undefined
}

/** Who is calling, as one request authenticated it. */
export interface Caller {
  /** The authenticated principal; undefined when auth is off. */
  readonly principal: string | undefined
  readonly access: Access
  /** The request's own Authorization header, kept only for upstreams configured with forwardAuthorization. */
  readonly authorization: string | undefined
  /** What the request authenticated with; undefined when auth is off. */
  readonly credential?: Credential | undefined
  /**
   * The key the per-principal limits count under (limits.sessionsPerPrincipal, tasks.maxActivePerPrincipal,
   * limits.storedBytesPerPrincipal): undefined for an authenticated caller, whose principal it is; with auth off
   * `anonymous@<client address>` (anonymousAccount), so that one address cannot take what all callers share.
   */
  readonly account?: string | undefined
  /** The client address of the request (server.trustProxy applied): who was refused, as the dashboard shows it. */
  readonly address?: string | undefined
}

/** The account of a caller without auth: its client address (server.trustProxy applied). */
export function anonymousAccount (address: string | undefined): string {
  return `anonymous@${address ?? ''}`
}

/** Whom a caller's limits count: its account, else the principal acting (`anonymous:<session>` without auth). */
export function accountOf (caller: Caller, principal: string): string {
  return caller.account ?? principal
}

export const FULL_ACCESS: Access = { all: true, key: '*', upstream: () => true, tool: () => true }

export const ANONYMOUS_CALLER: Caller = { principal: undefined, access: FULL_ACCESS, authorization: undefined }

const NO_ACCESS: Access = { all: false, key: '', upstream: () => false, tool: () => false }

/** The rules of `auth.permissions` an Access grants, each as text: what `narrowed` compares. */
const GRANTS = new WeakMap<Access, ReadonlySet<string>>([[NO_ACCESS, new Set()]])

/**
 * Whether `after` withholds something `before` granted: full access became limited, or a rule `before`
 * granted (its upstreams and tools) is not among the rules `after` grants. Deliberately strict: a rule
 * removed counts even when another rule happens to cover the same names.
 */
export function narrowed (before: Access, after: Access): boolean {
  if (after.all) return false
  if (before.all) return true
  const kept = GRANTS.get(after)
  const had = GRANTS.get(before)
  if (kept === undefined || had === undefined) return before !== after
  for (const grant of had) if (!kept.has(grant)) return true
  return false
}

/** Distinct scope sets compiled at most this many at a time (tokens rarely carry more than a few sets). */
const CACHE_LIMIT = 1000

/** Compiles `auth.permissions` into a function from a token's scopes to what they grant. */
export function compilePermissions (permissions: AuthConfig['permissions']): (scopes: readonly string[]) => Access {
  if (permissions.length === 0) return () => FULL_ACCESS
  const rules = permissions.map((rule) => ({
    scope: rule.scope,
    text: JSON.stringify({ upstreams: rule.upstreams, tools: rule.tools }),
    upstream: compileFilter({ allow: rule.upstreams, deny: [] }),
    tool: compileFilter({ allow: rule.tools, deny: [] }),
  }))
  const cache = new Map<string, Access>()
  return (scopes) => {
    const key = [...new Set(scopes)].sort().join(' ')
    const cached = cache.get(key)
    if (cached) return cached
    const granted = rules.filter((rule) => scopes.includes(rule.scope))
    const access: Access = granted.length === 0
      ? NO_ACCESS
      : {
          all: false,
          key,
          upstream: (name) => granted.some((rule) => rule.upstream(name)),
          tool: (upstream, exposedName) => granted.some((rule) => rule.upstream(upstream) || rule.tool(exposedName)),
        }
    GRANTS.set(access, new Set(granted.map((rule) => rule.text)))
    if (cache.size >= CACHE_LIMIT) cache.clear()
    cache.set(key, access)
    return access
  }
}

/** Each access, less each set of upstreams it lacks credentials for, made once (the lists it filters are cached by it). */
const WITHHOLDING = new WeakMap<Access, Map<string, Access>>()

/**
 * `access` less the upstreams named in `withheld`, which the caller has no credential for
 * (`upstreams[].credentials`): their entries are not listed to it, and a call of one gets
 * GW_ERR_UPSTREAM_NO_CREDENTIAL naming the upstream. The same access and names give the same object.
 */
export function withholding (access: Access, withheld: readonly string[]): Access {
  if (withheld.length === 0) return access
  const names = new Set(withheld)
  const key = [...names].sort().join('\u0000')
  let made = WITHHOLDING.get(access)
  if (made === undefined) {
    made = new Map()
    WITHHOLDING.set(access, made)
  }
  const known = made.get(key)
  if (known !== undefined) return known
  const narrower: Access = {
    all: false,
    // The key stays the grants' own: another process rebuilds the grants from it and applies its own credentials.
    key: access.key,
    upstream: (name) => !names.has(name) && access.upstream(name),
    tool: (upstream, exposedName) => !names.has(upstream) && access.tool(upstream, exposedName),
    refusal: (upstream) => names.has(upstream) && access.upstream(upstream)
      ? new GatewayError('GW_ERR_UPSTREAM_NO_CREDENTIAL', [upstream, 'no key is configured for it'])
      : undefined,
  }
  const grants = GRANTS.get(access)
  if (grants !== undefined) GRANTS.set(narrower, grants)
  if (made.size >= CACHE_LIMIT) made.clear()
  made.set(key, narrower)
  return narrower
}
