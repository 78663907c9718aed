import type { Config } from './schema.ts'
import { readPrincipalKeys } from './principal-keys.ts'
import { oauthSecretProblems, oauthSecretWarnings } from './oauth-secrets.ts'

/**
 * What a valid configuration does that its operator should know, said at start (in the log) and by `--check`
 * (on stderr), never refused: each with the YAML path it comes from.
 */
export interface ConfigWarning {
  readonly path: string
  readonly message: string
}

/** The one line said of an upstream with forwardAuthorization: the caller's own token leaves the gateway. */
export function forwardAuthorizationWarning (upstream: string): string {
  return `upstream '${upstream}' is sent each caller's own Authorization header (forwardAuthorization): a token issued for the gateway reaches another server, which could use it against the gateway or any service that accepts it; use it only for an upstream that shares the gateway's audience, else give it credentials`
}

type Env = Readonly<Record<string, string | undefined>>

export function configWarnings (config: Config, env: Env = process.env, cwd = process.cwd()): ConfigWarning[] {
  const warnings: ConfigWarning[] = []
  config.upstreams.forEach((upstream, index) => {
    if (upstream.transport === 'streamable-http' && upstream.forwardAuthorization) {
      warnings.push({ path: `upstreams[${index}].forwardAuthorization`, message: forwardAuthorizationWarning(upstream.name) })
    }
    if (upstream.transport !== 'stdio' && upstream.credentials?.kind === 'per-principal') {
      for (const warning of readPrincipalKeys(upstream.credentials, env, cwd).warnings) {
        warnings.push({ path: `upstreams[${index}].credentials.${warning.field}`, message: warning.message })
      }
    }
    if (upstream.transport !== 'stdio' && upstream.credentials?.kind === 'oauth') {
      for (const warning of oauthSecretWarnings(upstream.credentials, cwd)) {
        warnings.push({ path: `upstreams[${index}].credentials.${warning.field}`, message: warning.message })
      }
    }
  })
  return warnings
}

/**
 * The keys of every per-principal credential, and the client secrets and private keys of every OAuth one, that
 * cannot be read, each with its YAML path (a configuration error).
 */
export function credentialKeyProblems (config: Config, env: Env = process.env, cwd = process.cwd()): ConfigWarning[] {
  return config.upstreams.flatMap((upstream, index) => {
    if (upstream.transport === 'stdio' || upstream.credentials === undefined) return []
    const problems = upstream.credentials.kind === 'per-principal'
      ? readPrincipalKeys(upstream.credentials, env, cwd).problems
      : oauthSecretProblems(upstream.credentials, env, cwd)
    return problems.map((problem) => ({ path: `upstreams[${index}].credentials.${problem.field}`, message: problem.message }))
  })
}
