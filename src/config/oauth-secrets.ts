import { readFileSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import type { OAuthCredentialsConfig } from './credentials-schema.ts'

/**
 * The secrets of `credentials: { kind: oauth }` checked where the configuration is loaded (at start, at reload and
 * by `--check`): the client secret's file or variable and the private key's file must be readable and not empty,
 * so a gateway does not start (or reload) with an upstream it can never get a token for. What the files hold is
 * read again, and parsed, when the upstream's credentials are built; a problem names the option, never a secret.
 */

export interface SecretProblem {
  /** The option under `credentials` the problem is in. */
  readonly field: string
  readonly message: string
}

type Env = Readonly<Record<string, string | undefined>>

function fileProblem (field: string, what: string, path: string, cwd: string): SecretProblem | undefined {
  let text: string
  try {
    text = readFileSync(resolve(cwd, path), 'utf8')
  } catch (err) {
    return { field, message: `cannot read the ${what} file '${path}': ${(err as NodeJS.ErrnoException).code ?? String(err)}` }
  }
  return text.trim() === '' ? { field, message: `the ${what} file '${path}' is empty` } : undefined
}

/** Whether others than the file's owner may read it (group or world bits), as the other secret files are judged. */
function readableByOthers (path: string, cwd: string): boolean {
  try {
    return (statSync(resolve(cwd, path)).mode & 0o077) !== 0
  } catch {
    return false
  }
}

/** What keeps the upstream from authenticating at its authorization server: a configuration error. */
export function oauthSecretProblems (config: OAuthCredentialsConfig, env: Env = process.env, cwd = process.cwd()): SecretProblem[] {
  const problems: Array<SecretProblem | undefined> = []
  if (config.clientSecretFile !== undefined) problems.push(fileProblem('clientSecretFile', 'client secret', config.clientSecretFile, cwd))
  if (config.clientSecretEnv !== undefined && (env[config.clientSecretEnv] ?? '').trim() === '') {
    problems.push({ field: 'clientSecretEnv', message: `the environment variable ${config.clientSecretEnv} is not set (or empty)` })
  }
  if (config.privateKeyFile !== undefined) problems.push(fileProblem('privateKeyFile', 'private key', config.privateKeyFile, cwd))
  return problems.filter((problem) => problem !== undefined)
}

/** Said, not refused: a secret file others may read. */
export function oauthSecretWarnings (config: OAuthCredentialsConfig, cwd = process.cwd()): SecretProblem[] {
  const warnings: SecretProblem[] = []
  for (const field of ['clientSecretFile', 'privateKeyFile'] as const) {
    const path = config[field]
    if (path !== undefined && readableByOthers(path, cwd)) {
      warnings.push({ field, message: `the file '${path}' may be read by other users than the gateway's (its mode allows group or others); chmod 600 it` })
    }
  }
  return warnings
}
