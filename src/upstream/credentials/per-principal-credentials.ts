import type { PerPrincipalCredentialsConfig } from '../../config/credentials-schema.ts'
import { GatewayError } from '../../errors.ts'
import type { Logger } from '../../observability/logger.ts'
import { readPrincipalKeys } from '../../config/principal-keys.ts'
import type { CredentialSubject, UpstreamAuthHeaders, UpstreamCredentials } from './upstream-credentials.ts'

/**
 * `credentials: { kind: per-principal }`: each principal reaches the upstream with its own static key, sent as
 * `<header>: [<scheme> ]<key>`. The keys are read when the upstream starts and again at each configuration
 * reload (reload); the headers of each principal are made once per read, so asking for them per request is a
 * map lookup. An upstream session carries one principal's key: it serves that principal only.
 */
export class PerPrincipalCredentials implements UpstreamCredentials {
  readonly sharing = 'principal'
  readonly #upstream: string
  readonly #config: PerPrincipalCredentialsConfig
  readonly #log: Logger
  #headers = new Map<string, UpstreamAuthHeaders>()

  constructor (upstream: string, config: PerPrincipalCredentialsConfig, log: Logger) {
    this.#upstream = upstream
    this.#config = config
    this.#log = log
    this.reload()
  }

  /**
   * Reads the keys again (the file and the environment). A key that cannot be read now leaves the principals it
   * served without one (the loader refuses such a configuration at start and at reload, so this happens only
   * when the file changes between the two reads); what went wrong is logged, never a key.
   */
  reload (): void {
    const { keys, problems, warnings } = readPrincipalKeys(this.#config)
    for (const problem of [...problems, ...warnings]) this.#log.warn({ option: `credentials.${problem.field}` }, `upstream credentials: ${problem.message}`)
    const header = this.#config.header.toLowerCase()
    const scheme = this.#config.scheme
    const headers = new Map<string, UpstreamAuthHeaders>()
    for (const [principal, key] of keys) headers.set(principal, { headers: { [header]: scheme === undefined ? key : `${scheme} ${key}` } })
    this.#headers = headers
  }

  /** The principals with a key, and how many. */
  get principals (): number {
    return this.#headers.size
  }

  refusal (subject: CredentialSubject): GatewayError | undefined {
    const { principal } = subject
    return principal !== undefined && this.#headers.has(principal) ? undefined : this.#noKey(principal)
  }

  async headersFor (subject: CredentialSubject): Promise<UpstreamAuthHeaders> {
    const headers = subject.principal === undefined ? undefined : this.#headers.get(subject.principal)
    if (headers === undefined) throw this.#noKey(subject.principal)
    return headers
  }

  #noKey (principal: string | undefined): GatewayError {
    return new GatewayError('GW_ERR_UPSTREAM_NO_CREDENTIAL', [this.#upstream, principal === undefined ? 'the caller is not authenticated' : 'no key is configured for it'])
  }

  /** A static key the upstream refused is sent again only if a reload changed it meanwhile. */
  rejected (subject: CredentialSubject, sent: UpstreamAuthHeaders): boolean {
    const now = subject.principal === undefined ? undefined : this.#headers.get(subject.principal)
    return now !== undefined && now !== sent
  }

  async close (): Promise<void> {}
}
