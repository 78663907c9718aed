import type { HttpUpstreamConfig, UpstreamConfig } from '../../config/schema.ts'
import type { Logger } from '../../observability/logger.ts'
import { CallerSubject, type CallerTokens } from '../../auth/caller-tokens.ts'
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

const NONE: CreatedCredentials = { callers: undefined, gateway: undefined }

/** The credentials `upstreams[].credentials` configures for an upstream; none when it has none (or is stdio). */
export function createUpstreamCredentials (config: UpstreamConfig, log: Logger): CreatedCredentials {
  if (config.transport === 'stdio' || config.credentials === undefined) return NONE
  const credentials = config.credentials
  switch (credentials.kind) {
    case 'per-principal':
      return { callers: new PerPrincipalCredentials(config.name, credentials, log), gateway: undefined }
    case 'oauth':
      return oauthCredentials(config, credentials)
  }
}

function oauthCredentials (config: HttpUpstreamConfig, credentials: Extract<HttpUpstreamConfig['credentials'], { kind: 'oauth' }>): CreatedCredentials {
  const options = oauthOptions(config.name, config.url, credentials)
  const service = (): DeferredCredentials => new DeferredCredentials('gateway', async () => await OAuthClientCredentials.create(options))
  if (credentials.grant === 'client_credentials') {
    const shared = service()
    return { callers: shared, gateway: shared }
  }
  // The place where what renews a principal's token without its caller (stored grants, for resumed tasks) is
  // given to the exchange: an option of OAuthTokenExchange.create next to `options`.
  const exchange = new DeferredCredentials('principal', async () => await OAuthTokenExchange.create(options))
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
