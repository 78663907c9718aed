#!/usr/bin/env node
import { parseArgs } from 'node:util'
import { configError, loadConfig, readConfig, type LoadedConfig } from './config/load.ts'
import { preflight } from './config/preflight.ts'
import { configWarnings } from './config/config-warnings.ts'
import { unreadVariables } from './config/env-overrides.ts'
import { openListenerProblems } from './config/open-listener.ts'
import type { Config } from './config/schema.ts'
import { GatewayError, errorMessage } from './errors.ts'
import type { Gateway } from './gateway.ts'
import { createLogger, type Logger } from './observability/logger.ts'
import { GATEWAY_INFO } from './wire/versions.ts'
import { settled } from './observability/ignored.ts'

const HELP = `mcp-task-gateway ${GATEWAY_INFO.version}: one MCP endpoint in front of many MCP servers; any tool can run as a task.

Usage: mcp-task-gateway --config <file> [options]
       mcp-task-gateway backup --config <file> --to <new file>

Commands:
  backup                   copy the SQLite store of the configuration into a new file while a gateway
                           may be running on it (a consistent snapshot; see docs/operations.md)

Options:
  -c, --config <file>      YAML configuration (required; see config/gateway.example.yaml)
      --host <address>     listen address, overrides server.host
      --port <number>      listen port, overrides server.port (0 picks a free port)
      --log-level <level>  fatal | error | warn | info | debug | trace | silent, overrides logging.level
      --check              validate the configuration (and that stdio commands exist), list the
                           GATEWAY_… environment variables it applies, and exit
      --to <file>          backup: the file to write (never overwritten)
  -h, --help               show this help
  -v, --version            print the version

Signals: SIGINT and SIGTERM stop taking requests, let in-flight calls finish within
server.shutdownGrace, cancel the rest, close the upstreams and exit 0 (1 when a step of
the shutdown failed; every step still runs). SIGHUP reads the
configuration file again and puts it in force without dropping sessions or running tasks
(a file that does not validate changes nothing; see docs/reload.md).
`

const LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])

function fail (message: string, code = 2): never {
  process.stderr.write(`mcp-task-gateway: ${message}\n`)
  process.exit(code)
}

function withOverrides (config: Config, values: { host?: string, port?: string, 'log-level'?: string }): Config {
  const server = { ...config.server }
  const logging = { ...config.logging }
  if (values.host !== undefined) server.host = values.host
  if (values.port !== undefined) {
    const port = Number(values.port)
    if (!Number.isInteger(port) || port < 0 || port > 65_535) fail(`--port must be an integer from 0 to 65535, got '${values.port}'`)
    server.port = port
  }
  const level = values['log-level']
  if (level !== undefined) {
    if (!LEVELS.has(level)) fail(`--log-level must be one of ${[...LEVELS].join(', ')}, got '${level}'`)
    logging.level = level as Config['logging']['level']
  }
  return { ...config, server, logging }
}

/** Builds the gateway and listens at once; the upstreams connect meanwhile (see Gateway.ready). */
async function listening (config: Config, log: Logger, configSource: () => Promise<Config>): Promise<Gateway> {
  // Imported here, not at the top: --check, --help and backup never load the gateway (most of a start's CPU).
  const { buildGateway } = await import('./gateway.ts')
  const gateway = await buildGateway(config, { logger: log, configSource })
  try {
    const address = await gateway.app.listen({ host: config.server.host, port: config.server.port })
    log.info({ address: `${address}${config.server.path}`, processId: gateway.processId, pid: process.pid }, 'gateway listening')
    if (gateway.admin !== undefined && config.admin !== undefined) {
      const adminAddress = await gateway.admin.listen({ host: config.admin.host, port: config.admin.port })
      log.info({ address: `${adminAddress}/admin` }, 'admin API listening')
    }
    return gateway
  } catch (err) {
    // Each shutdown step that fails is logged as it fails; the listen error is the one reported.
    await settled(gateway.close())
    throw err
  }
}

async function startFailed (log: Logger, gateway: Gateway | undefined, err: unknown): Promise<never> {
  log.fatal({ err }, 'gateway failed to start')
  // Each shutdown step that fails is logged as it fails; the start's error is the one reported.
  if (gateway !== undefined) await settled(gateway.close())
  // A configuration problem found only at start (an unreadable TLS file) exits as --check would.
  fail(errorMessage(err), err instanceof GatewayError && err.code === 'GW_ERR_CONFIG_INVALID' ? 2 : 1)
}

/** `backup`: one line on stdout saying what was copied, or the reason on stderr (exit 1). */
async function backup (configFile: string, to: string | undefined): Promise<void> {
  if (to === undefined) fail('backup needs --to <new file>')
  let config: Config
  try {
    config = await loadConfig(configFile)
  } catch (err) {
    fail(err instanceof GatewayError ? err.message : errorMessage(err))
  }
  const { backupStore } = await import('./store/backup.ts')
  try {
    const copy = backupStore(config.store, to)
    process.stdout.write(`${copy.target}: backup of the store taken at ${copy.takenAt.toISOString()} (${copy.tasks} tasks, ${copy.bytes} bytes, ${copy.ms} ms)\n`)
  } catch (err) {
    fail(`backup failed: ${errorMessage(err)}`, 1)
  }
}

async function main (): Promise<void> {
  let parsed
  try {
    parsed = parseArgs({
      options: {
        config: { type: 'string', short: 'c' },
        host: { type: 'string' },
        port: { type: 'string' },
        'log-level': { type: 'string' },
        check: { type: 'boolean' },
        to: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
      strict: true,
      allowPositionals: true,
    })
  } catch (err) {
    fail(`${errorMessage(err)}\n\n${HELP}`)
  }
  const { values, positionals } = parsed
  if (values.help) {
    process.stdout.write(HELP)
    return
  }
  if (values.version) {
    process.stdout.write(`${GATEWAY_INFO.version}\n`)
    return
  }
  if (values.config === undefined) fail(`--config is required\n\n${HELP}`)
  const [command, ...extra] = positionals
  if (command !== undefined && (command !== 'backup' || extra.length > 0)) fail(`unknown command '${positionals.join(' ')}'\n\n${HELP}`)
  if (command === 'backup') return backup(values.config, values.to)
  if (values.to !== undefined) fail('--to belongs to the backup command: mcp-task-gateway backup --config <file> --to <new file>')

  let loaded: LoadedConfig
  try {
    loaded = await readConfig(values.config)
  } catch (err) {
    fail(err instanceof GatewayError ? err.message : errorMessage(err))
  }
  const config = withOverrides(loaded.config, values)
  // The file was checked with its own server.host; --host may open the listener to other machines.
  const open = values.host === undefined ? [] : openListenerProblems(config, '--host (server.host)')
  if (open.length > 0) fail(configError(values.config, open).message)
  // What can be known without starting an upstream: fatal for --check; at start the upstream reports it.
  const problems = preflight(config, process.env, process.cwd(), loaded.written)
  if (values.check) {
    if (problems.length > 0) fail(configError(values.config, problems).message)
    const applied = loaded.overrides.map((o) => `  ${o.variable} sets ${o.path}\n`).join('')
    for (const warning of configWarnings(config)) process.stderr.write(`warning: ${warning.path}: ${warning.message}\n`)
    for (const name of unreadVariables(process.env)) process.stderr.write(`note: ${name} is not read: the parts of an option's path are separated by __ (GATEWAY_SERVER__PORT)\n`)
    process.stdout.write(`${values.config}: configuration is valid (${config.upstreams.length} upstreams)\n${applied === '' ? '' : `from the environment:\n${applied}`}`)
    return
  }

  const log = createLogger(config.logging)
  for (const problem of problems) log.warn({ path: problem.path }, `configuration: ${problem.message}`)
  if (loaded.overrides.length > 0) log.info({ overrides: loaded.overrides }, 'configuration: options set by GATEWAY_… environment variables')
  const file = values.config
  // The same file again, with the same command-line overrides (SIGHUP and POST /admin/reload).
  const configSource = async (): Promise<Config> => {
    const again = await readConfig(file)
    const next = withOverrides(again.config, values)
    for (const problem of preflight(next, process.env, process.cwd(), again.written)) log.warn({ path: problem.path }, `configuration: ${problem.message}`)
    return next
  }
  // Like the gateway itself (listening), loaded only to serve.
  const [{ logRejectedReload }, { upstreamSurvival }] = await Promise.all([import('./reload/reloader.ts'), import('./tasks/survival.ts')])
  let gateway: Gateway
  try {
    gateway = await listening(config, log, configSource)
  } catch (err) {
    return await startFailed(log, undefined, err)
  }

  let stopping = false
  const stop = (signal: string): void => {
    if (stopping) return
    stopping = true
    log.info({ signal }, 'shutting down')
    gateway.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  process.on('SIGINT', () => stop('SIGINT'))
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGHUP', () => {
    if (stopping) return
    log.info({ signal: 'SIGHUP', file }, 'reloading the configuration')
    configSource().then(
      async (next) => { await gateway.reload(next) },
      (err: unknown) => logRejectedReload(log, err, 'SIGHUP'),
    ).catch((err: unknown) => log.error({ err }, 'configuration reload failed'))
  })

  // The upstreams connect while the gateway already serves; colliding names stop it once they are known.
  try {
    await gateway.ready
  } catch (err) {
    if (!stopping) await startFailed(log, gateway, err)
    return
  }
  if (stopping) return
  const down = gateway.upstreams.filter((u) => u.state !== 'ready').map((u) => u.name)
  log.info({ ready: gateway.upstreams.length - down.length, down }, 'upstreams started')
  // What a restart would cost, so an operator knows before doing one (also GET /admin/survival).
  for (const upstream of gateway.upstreams) log.info(upstreamSurvival(upstream, gateway.catalog.nativeTools(upstream.name)), 'what a restart costs running tasks of this upstream')
}

await main()
