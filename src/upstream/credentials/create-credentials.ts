import type { HttpUpstreamConfig, UpstreamConfig } from '../../config/schema.ts'
import type { Logger } from '../../observability/logger.ts'
import { CallerSubject, type CallerTokens } from '../../auth/caller-tokens.ts'
import type { GrantVault } from '../../store/grant-vault.ts'
import { OAuthClientCredentials } from './oauth/client-credentials-grant.ts'
import { DeferredCredentials, oauthOptions } from './oauth/oauth-config.ts'
import { OAuthTokenExchange } from './oauth/token-exchange-grant.ts'
import { PerPrincipalCredentials } from './per-principal-credentials.ts'
import type { SessionCredentials } from './credentialed-requests.ts'
import type { UpstreamCredentials } from './upstream-credentials.ts'

/** What an upstream's requests are sent with: for its callers' sessions, and for the gateway's own session. */
export interface CreatedCredentials {
  /** For the sessions that serve callers; undefined: the configured headers alone. */
  readonly callers: UpstreamCredentials | undefined
  /**
   * For the gateway's own session (its health, the lists every caller starts from); undefined: the configured
   * headers alone. OAuth client credentials serve both; a token exchange, which needs a caller, gets the
   * gateway's own client credentials here unless `gatewaySession: headers`.
   */
  readonly gateway: UpstreamCredentials | undefined
}

/** What the gateway keeps for its upstreams' credentials, shared by every upstream (and those a reload adds). */
export interface CredentialSources {
  /** The callers' own access tokens, for a token exchange (memory only). */
  readonly callerTokens: CallerTokens
  /**
   * The sealed grants that renew a principal's upstream token for work resumed without its caller (a task taken
   * over by another process, or after a restart); opened on first use, so a gateway without a token exchange
   * makes none.
   */
  readonly grants: () => GrantVault
}

const NONE: CreatedCredentials = { callers: undefined, gateway: undefined }

/** The credentials `upstreams[].credentials` configures for an upstream; none when it has none (or is stdio). */
export function createUpstreamCredentials (config: UpstreamConfig, log: Logger, grants?: () => GrantVault): CreatedCredentials {
  if (config.transport === 'stdio' || config.credentials === undefined) return NONE
  const credentials = config.credentials
  switch (credentials.kind) {
    case 'per-principal':
      return { callers: new PerPrincipalCredentials(config.name, credentials, log), gateway: undefined }
    case 'oauth':
      return oauthCredentials(config, credentials, grants)
  }
}

function oauthCredentials (
  config: HttpUpstreamConfig,
  credentials: Extract<HttpUpstreamConfig['credentials'], { kind: 'oauth' }>,
  grants: (() => GrantVault) | undefined,
): CreatedCredentials {
  const options = oauthOptions(config.name, config.url, credentials)
  const service = (): DeferredCredentials => new DeferredCredentials('gateway', async () => await OAuthClientCredentials.create(options))
  if (credentials.grant === 'client_credentials') {
    const shared = service()
    return { callers: shared, gateway: shared }
  }
  // What renews a principal's token without its caller (sealed grants in the store) serves resumed tasks.
  const exchange = new DeferredCredentials('principal', async () => await OAuthTokenExchange.create({ ...options, grants: grants?.() }))
  return { callers: exchange, gateway: credentials.gatewaySession === 'client_credentials' ? service() : undefined }
}

/**
 * What a new upstream session's requests are sent with: `credentials`, for `principal` (undefined for the gateway's
 * own session), with, for a token exchange, the latest access token that principal authenticated with (read per
 * request, so a caller that renewed its token is exchanged with the new one; none once it expired, or for work
 * resumed without its caller).
 */
export function sessionCredentials (
  credentials: UpstreamCredentials | undefined,
  principal: string | undefined,
  tokens: CallerTokens | undefined,
): SessionCredentials | undefined {
  if (credentials === undefined) return undefined
  const subject = tokens === undefined || principal === undefined ? { principal } : new CallerSubject(principal, tokens)
  return { credentials, subject }
}
