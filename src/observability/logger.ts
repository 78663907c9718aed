import { createHash } from 'node:crypto'
import { pino, type DestinationStream, type Logger as PinoLogger, type LoggerOptions } from 'pino'
import type { Config } from '../config/schema.ts'
import { prettyDestination } from './pretty-log.ts'

export type Logger = PinoLogger

/** Header names whose values never reach a log line, whatever the configuration says. */
export const ALWAYS_REDACTED_HEADERS = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key']

/** What stands in a log line for a redacted value. */
const REDACTED = '[redacted]'

/** Request headers whose names start so carry tool arguments (2026-07-28 `Mcp-Param-*`): values never logged. */
const ARGUMENT_HEADER_PREFIX = 'mcp-param-'

/**
 * What a log line shows instead of a session id (with auth off, the id is all it takes to use the session):
 * `sha256:` and the first 12 hex digits of the id's SHA-256, the same on every line and every process.
 */
export function logFingerprint (value: string): string {
  return `sha256:${createHash('sha256').update(value, 'utf8').digest('hex').slice(0, 12)}`
}

/** How the principal of a 2025-era client without auth starts: `anonymous:<its session id>`. */
const ANONYMOUS_SESSION_PREFIX = 'anonymous:'

/**
 * A principal as logs and the admin API show it: with auth off, a session's principal `anonymous:<session id>`
 * holds the id, all it takes to use the session, so it is shown `anonymous:sha256:<fingerprint>` (as
 * logFingerprint); every other principal (token and OAuth names, the 2026-07-28 `anonymous`) as it is.
 */
export function shownPrincipal (principal: string): string {
  return principal.startsWith(ANONYMOUS_SESSION_PREFIX) ? `${ANONYMOUS_SESSION_PREFIX}${logFingerprint(principal.slice(ANONYMOUS_SESSION_PREFIX.length))}` : principal
}

export function redactPaths (extraHeaders: readonly string[]): string[] {
  const names = [...new Set([...ALWAYS_REDACTED_HEADERS, 'mcp-session-id', ...extraHeaders.map((h) => h.toLowerCase())])]
  return [
    'sessionId',
    'principal',
    'session',
    'client',
    ...names.flatMap((name) => [
      `req.headers["${name}"]`,
      `res.headers["${name}"]`,
      `headers["${name}"]`,
    ]),
  ]
}

/** How the key of a 2025-era client (`session` and `client` fields of upstream session lines) starts. */
const SESSION_CLIENT_PREFIX = 'session:'

/**
 * Session ids become their fingerprint, in client keys and anonymous principals too (other `session`, `client`
 * and `principal` values, such as `principal:…` keys, client info and token principals, stay as they are);
 * everything else on a redacted path becomes `[redacted]`.
 */
function censor (value: unknown, path: string[]): unknown {
  const key = path.at(-1)
  if (key === 'principal') return typeof value === 'string' ? shownPrincipal(value) : value
  if (key === 'session' || key === 'client') {
    return typeof value === 'string' && value.startsWith(SESSION_CLIENT_PREFIX)
      ? `${SESSION_CLIENT_PREFIX}${logFingerprint(value.slice(SESSION_CLIENT_PREFIX.length))}`
      : value
  }
  if ((key === 'sessionId' || key === 'mcp-session-id') && typeof value === 'string') return logFingerprint(value)
  return REDACTED
}

/** A request URL without the values of its query parameters (tokens are sometimes sent as `?access_token=`). */
export function loggedUrl (url: string | undefined): string | undefined {
  const query = url?.indexOf('?') ?? -1
  if (url === undefined || query === -1) return url
  const names = url.slice(query + 1).split('&').filter((pair) => pair !== '').map((pair) => `${pair.split('=')[0]!.slice(0, 64)}=${REDACTED}`)
  return `${url.slice(0, query)}?${names.join('&')}`
}

/** Request headers as logged: tool argument values left out (the redact paths handle credentials). */
function loggedHeaders (headers: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (headers === undefined) return undefined
  const logged: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(headers)) {
    logged[name] = name.toLowerCase().startsWith(ARGUMENT_HEADER_PREFIX) ? REDACTED : value
  }
  return logged
}

export function loggerOptions (config: Pick<Config['logging'], 'level' | 'redactHeaders'>): LoggerOptions {
  return {
    level: config.level,
    base: { service: 'mcp-task-gateway' },
    redact: { paths: redactPaths(config.redactHeaders), censor },
    serializers: {
      req: (req: { method?: string, url?: string, headers?: Record<string, unknown>, id?: string }) => ({
        id: req.id,
        method: req.method,
        url: loggedUrl(req.url),
        headers: loggedHeaders(req.headers),
      }),
    },
  }
}

/** The gateway's logger: JSON lines on `destination` (stdout by default), or readable ones with `format: pretty`. */
export function createLogger (config: Pick<Config['logging'], 'level' | 'redactHeaders' | 'format'>, destination?: DestinationStream): Logger {
  if (config.format === 'pretty') return pino(loggerOptions(config), prettyDestination(destination ?? process.stdout))
  return destination ? pino(loggerOptions(config), destination) : pino(loggerOptions(config))
}
