import { compilePermissions, type Access } from '../auth/access.ts'
import { createAuthenticator, type Authenticator } from '../auth/bearer-tokens.ts'
import type { OAuthResource } from '../auth/oauth-resource.ts'
import { CallerTokens } from '../auth/caller-tokens.ts'
import type { Live } from '../config/live.ts'
import type { Config, TasksConfig } from '../config/schema.ts'
import { createRateLimiter, type RateLimiter } from '../limits/rate-limiter.ts'
import type { Logger } from '../observability/logger.ts'
import type { GrantVault } from '../store/grant-vault.ts'
import type { RateLimitStore } from '../store/types.ts'
import type { CredentialSources } from '../upstream/credentials/create-credentials.ts'

export interface LiveSettingsDeps {
  /** The OAuth resource server built at start (auth.oauth needs a restart to change). */
  oauth: OAuthResource | undefined
  rateLimits: RateLimitStore
  log: Logger
  /** The sealed grants of token exchanges (opened on first use): for the upstreams made at start and by reloads. */
  grants: () => GrantVault
}

/** Whether some upstream is sent each caller's own Authorization header (then the caller keeps it). */
function forwardsAuthorization (config: Config): boolean {
  return config.upstreams.some((u) => u.transport === 'streamable-http' && u.forwardAuthorization)
}

/** Whether some upstream exchanges each caller's own access token (then the authenticator notes it). */
function exchangesTokens (config: Config): boolean {
  return config.upstreams.some((u) => u.transport !== 'stdio' && u.credentials?.kind === 'oauth' && u.credentials.grant === 'token_exchange')
}

/**
 * The one holder of the configuration in force, and of what requests read from it: the authenticator
 * (static tokens, permissions), the rate limiter, the grants of a set of scopes, the task options and
 * the per-principal session limit. A reload replaces the configuration; every request after it reads the
 * new values, while parts built at start (listeners, store, timers) keep theirs.
 */
export class LiveSettings {
  readonly #deps: LiveSettingsDeps
  #config: Config
  #authenticator: Authenticator | undefined
  #limiter: RateLimiter | undefined
  #access: (scopes: readonly string[]) => Access
  #passAuthorization: boolean
  #exchangesTokens: boolean
  /** The callers' own access tokens, for upstreams that exchange them (memory only; see CallerTokens). */
  readonly callerTokens = new CallerTokens()
  /** What every upstream's credentials draw on: the callers' tokens and the sealed grants. */
  readonly credentialSources: CredentialSources
  /** `tasks.*` as the task service, inputs and calls read them: always the values in force. */
  readonly tasks: Live<TasksConfig>
  /** The bytes one principal's tasks may store (limits.storedBytesPerPrincipal), read at each write. */
  readonly budget: Live<{ readonly storedBytesPerPrincipal: number }>

  constructor (config: Config, deps: LiveSettingsDeps) {
    this.#deps = deps
    this.#config = config
    this.credentialSources = { callerTokens: this.callerTokens, grants: deps.grants }
    this.#passAuthorization = forwardsAuthorization(config)
    this.#exchangesTokens = exchangesTokens(config)
    this.#authenticator = this.#createAuthenticator(config)
    this.#limiter = this.#createLimiter(config)
    this.#access = compilePermissions(config.auth.permissions)
    const read = (): TasksConfig => this.#config.tasks
    this.tasks = {
      get defaultTtl () { return read().defaultTtl },
      get maxTtl () { return read().maxTtl },
      get pollInterval () { return read().pollInterval },
      get pollIntervalMax () { return read().pollIntervalMax },
      get maxActivePerPrincipal () { return read().maxActivePerPrincipal },
      get maxQueuedInputs () { return read().maxQueuedInputs },
      get maxResultBytes () { return read().maxResultBytes },
      get sweepInterval () { return read().sweepInterval },
      get ownerLease () { return read().ownerLease },
      get decide () { return read().decide },
    }
    const limits = (): Config['limits'] => this.#config.limits
    this.budget = { get storedBytesPerPrincipal () { return limits().storedBytesPerPrincipal } }
  }

  /** The whole configuration in force: a reload replaces it. */
  get config (): Live<Config> {
    return this.#config
  }

  /** Undefined when auth is off. */
  get authenticator (): Live<Authenticator | undefined> {
    return this.#authenticator
  }

  /** Undefined when every rate limit is off. */
  get limiter (): Live<RateLimiter | undefined> {
    return this.#limiter
  }

  /** With auth off: whether a request's Authorization header is kept for upstreams with forwardAuthorization. */
  get passAuthorization (): Live<boolean> {
    return this.#passAuthorization
  }

  /** What a token's scopes grant under the permissions in force. */
  access (scopes: readonly string[]): Access {
    return this.#access(scopes)
  }

  /**
   * Puts `config` in force (it holds the running values of options read only at start). What it derives is
   * rebuilt only when its part changed; the token buckets themselves live in the store and outlast a rebuild.
   */
  apply (config: Config): void {
    const before = this.#config
    this.#config = config
    const pass = forwardsAuthorization(config)
    const exchanges = exchangesTokens(config)
    const authChanged = JSON.stringify(before.auth) !== JSON.stringify(config.auth)
    if (authChanged || pass !== this.#passAuthorization || exchanges !== this.#exchangesTokens) {
      this.#passAuthorization = pass
      this.#exchangesTokens = exchanges
      if (!exchanges) this.callerTokens.clear()
      this.#authenticator = this.#createAuthenticator(config)
      this.#access = compilePermissions(config.auth.permissions)
    }
    if (JSON.stringify(before.limits) !== JSON.stringify(config.limits) || before.tasks.pollInterval !== config.tasks.pollInterval) {
      this.#limiter = this.#createLimiter(config)
    }
  }

  #createAuthenticator (config: Config): Authenticator | undefined {
    const tokens = this.#exchangesTokens ? this.callerTokens : undefined
    return createAuthenticator(config.auth, this.#deps.oauth, this.#passAuthorization, tokens)
  }

  #createLimiter (config: Config): RateLimiter | undefined {
    return createRateLimiter({
      limits: config.limits,
      pollIntervalMs: config.tasks.pollInterval,
      store: this.#deps.rateLimits,
      log: this.#deps.log,
    })
  }
}
