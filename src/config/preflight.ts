import { createPrivateKey, X509Certificate } from 'node:crypto'
import { accessSync, constants, readFileSync, statSync } from 'node:fs'
import { delimiter, isAbsolute, join, resolve } from 'node:path'
import type { ConfigProblem, Env } from './interpolate.ts'
import { compileFilter } from './name-filter.ts'
import { upstreamPrefix, type Config, type StdioUpstreamConfig, type UpstreamConfig } from './schema.ts'
import { scriptArgument } from './script-args.ts'

/**
 * What can be checked of a valid configuration without starting an upstream (`--check`): that each stdio
 * upstream's `cwd` is a directory, its `command` an executable file (a name is looked up on the PATH the
 * child gets, a path with a slash from its `cwd`) and the script its interpreter runs a file (script-args.ts);
 * that no two upstreams are certain to collide: the same server under the same prefix with the same filters
 * offers every name twice; that the `server.tls` and `admin.tls` files can be read, hold a certificate and a
 * key, and that the key is the certificate's; that every upstream a permission names exists; and that metrics
 * written for the admin listener have one. `written` is the configuration as written, before defaults.
 */
export function preflight (config: Config, env: Env = process.env, cwd = process.cwd(), written?: unknown): ConfigProblem[] {
  const problems: ConfigProblem[] = []
  config.upstreams.forEach((upstream, index) => {
    if (upstream.transport === 'stdio') problems.push(...stdioProblems(upstream, index, env, cwd))
  })
  problems.push(...certainCollisions(config.upstreams))
  problems.push(...tlsProblems(config.server.tls, 'server.tls', cwd))
  problems.push(...tlsProblems(config.admin?.tls, 'admin.tls', cwd))
  problems.push(...permissionProblems(config))
  problems.push(...metricsProblems(config, written))
  return problems
}

/** Upstream names and patterns of `auth.permissions` that match no upstream: they grant nothing. */
function permissionProblems (config: Config): ConfigProblem[] {
  const names = config.upstreams.map((u) => u.name)
  const list = `upstreams: ${names.join(', ')}`
  return config.auth.permissions.flatMap((rule, i) => rule.upstreams.flatMap((pattern, j) => {
    const matches = compileFilter({ allow: [pattern], deny: [] })
    if (names.some(matches)) return []
    const message = pattern.includes('*') ? `'${pattern}' matches no upstream (${list})` : `no upstream is named '${pattern}' (${list})`
    return [{ path: `auth.permissions[${i}].upstreams[${j}]`, message: `${message}; the rule grants nothing through it` }]
  }))
}

/**
 * Metrics written for the admin listener (the default) when none is configured: nothing is collected, which
 * the operator who wrote a `metrics` section did not mean. Left out, or `enabled: false`, it says nothing.
 */
function metricsProblems (config: Config, written: unknown): ConfigProblem[] {
  const wrote = written !== null && typeof written === 'object' && 'metrics' in written
  if (!wrote || !config.metrics.enabled || config.metrics.listener !== 'admin' || config.admin !== undefined) return []
  return [{
    path: 'metrics.listener',
    message: 'metrics are served on the admin listener (listener: admin, the default), and no admin listener is configured, so nothing would be collected; configure admin, set listener: main (anyone who reaches the gateway may read them), or enabled: false',
  }]
}

/** A `tls` section's files that cannot be read, or else a certificate or key that cannot serve, or do not match. */
function tlsProblems (tls: Config['server']['tls'], at: string, cwd: string): ConfigProblem[] {
  const unreadable = unreadableFiles(tls, at, cwd)
  if (tls === undefined || unreadable.length > 0) return unreadable
  let certificate: X509Certificate
  try {
    certificate = new X509Certificate(readFileSync(resolve(cwd, tls.cert)))
  } catch (err) {
    return [{ path: `${at}.cert`, message: `'${tls.cert}' holds no PEM certificate: ${(err as Error).message}` }]
  }
  let key
  try {
    key = createPrivateKey(readFileSync(resolve(cwd, tls.key)))
  } catch (err) {
    return [{ path: `${at}.key`, message: `'${tls.key}' holds no unencrypted PEM private key: ${(err as Error).message}` }]
  }
  if (matches(certificate, key)) return []
  return [{ path: `${at}.key`, message: `the key '${tls.key}' does not belong to the certificate '${tls.cert}' (${at}.cert); the listener could not start with them` }]
}

/** The files of a `tls` section that cannot be read (the listener reads them at start). */
function unreadableFiles (files: Readonly<Record<string, string | undefined>> | undefined, at: string, cwd: string): ConfigProblem[] {
  return Object.entries(files ?? {}).flatMap(([field, path]) => {
    if (path === undefined) return []
    try {
      accessSync(resolve(cwd, path), constants.R_OK)
      return []
    } catch (err) {
      return [{ path: `${at}.${field}`, message: `cannot read '${path}': ${(err as NodeJS.ErrnoException).code ?? String(err)}` }]
    }
  })
}

/** Whether `key` is the private key of `certificate` (a key of another type is not). */
function matches (certificate: X509Certificate, key: ReturnType<typeof createPrivateKey>): boolean {
  try {
    return certificate.checkPrivateKey(key)
  } catch {
    return false
  }
}

function isDirectory (path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

/** Why `path` cannot be run, or undefined when it can. */
function notRunnable (path: string): string | undefined {
  let stats
  try {
    stats = statSync(path)
  } catch {
    return 'does not exist'
  }
  if (!stats.isFile()) return 'is not a file'
  try {
    accessSync(path, constants.X_OK)
  } catch {
    return 'is not executable'
  }
  return undefined
}

function stdioProblems (upstream: StdioUpstreamConfig, index: number, env: Env, gatewayCwd: string): ConfigProblem[] {
  const problems: ConfigProblem[] = []
  const at = `upstreams[${index}]`
  const cwd = upstream.cwd === undefined ? gatewayCwd : resolve(gatewayCwd, upstream.cwd)
  if (upstream.cwd !== undefined && !isDirectory(cwd)) {
    problems.push({ path: `${at}.cwd`, message: `'${upstream.cwd}' is not a directory` })
    return problems
  }
  const relative = ` (relative to ${upstream.cwd === undefined ? 'the gateway\'s working directory' : 'cwd'})`
  const command = upstream.command
  if (command.includes('/')) {
    const why = notRunnable(isAbsolute(command) ? command : resolve(cwd, command))
    if (why !== undefined) problems.push({ path: `${at}.command`, message: `'${command}' ${why}${isAbsolute(command) ? '' : relative}` })
  } else {
    const path = upstream.env.PATH ?? env.PATH ?? ''
    const found = path.split(delimiter).filter((dir) => dir !== '').some((dir) => notRunnable(join(resolve(cwd, dir), command)) === undefined)
    if (!found) problems.push({ path: `${at}.command`, message: `'${command}' is not found on the PATH (${path === '' ? 'empty' : path}); install it or write its full path` })
  }
  const scriptAt = scriptArgument(command, upstream.args)
  const script = scriptAt === undefined ? undefined : upstream.args[scriptAt]!
  const notFile = script === undefined ? undefined : notAFile(resolve(cwd, script))
  if (notFile !== undefined) problems.push({ path: `${at}.args[${scriptAt!}]`, message: `the script '${script!}' ${notFile}${isAbsolute(script!) ? '' : relative}` })
  return problems
}

/** Why `path` is no file to run, or undefined when it is one. */
function notAFile (path: string): string | undefined {
  try {
    return statSync(path).isFile() ? undefined : 'is not a file'
  } catch {
    return 'does not exist'
  }
}

/** What identifies the server an upstream runs, and what it lets through. */
function serverOf (upstream: UpstreamConfig): string {
  const server = upstream.transport === 'stdio'
    ? { command: upstream.command, args: upstream.args, cwd: upstream.cwd ?? null, env: upstream.env }
    : { url: upstream.url }
  return JSON.stringify({
    server,
    prefix: upstreamPrefix(upstream),
    tools: upstream.tools,
    prompts: upstream.prompts,
    resources: upstream.resources,
  })
}

function certainCollisions (upstreams: readonly UpstreamConfig[]): ConfigProblem[] {
  const seen = new Map<string, UpstreamConfig>()
  const problems: ConfigProblem[] = []
  upstreams.forEach((upstream, index) => {
    const key = serverOf(upstream)
    const first = seen.get(key)
    if (first === undefined) {
      seen.set(key, upstream)
      return
    }
    problems.push({
      path: `upstreams[${index}].prefix`,
      message: `upstream '${upstream.name}' runs the same server as '${first.name}' under the same prefix '${upstreamPrefix(upstream)}', so every name it offers collides (the gateway would stop at start with GW_ERR_CATALOG_COLLISION); give one of them its own prefix or filters`,
    })
  })
  return problems
}
