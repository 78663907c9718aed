import type { UpstreamConfig } from '../../config/schema.ts'
import type { Logger } from '../../observability/logger.ts'
import { PerPrincipalCredentials } from './per-principal-credentials.ts'
import type { UpstreamCredentials } from './upstream-credentials.ts'

/** The credentials `upstreams[].credentials` configures for an upstream; undefined when it has none (or is stdio). */
export function createUpstreamCredentials (config: UpstreamConfig, log: Logger): UpstreamCredentials | undefined {
  if (config.transport === 'stdio' || config.credentials === undefined) return undefined
  const credentials = config.credentials
  switch (credentials.kind) {
    case 'per-principal':
      return new PerPrincipalCredentials(config.name, credentials, log)
    // kind: oauth (client credentials, token exchange) is made here.
  }
}
