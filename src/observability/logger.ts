import { pino, type DestinationStream, type Logger as PinoLogger, type LoggerOptions } from 'pino'
import type { Config } from '../config/schema.ts'

export type Logger = PinoLogger

/** Header names whose values never reach a log line, whatever the configuration says. */
export const ALWAYS_REDACTED_HEADERS = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key']

export function redactPaths (extraHeaders: readonly string[]): string[] {
  const names = [...new Set([...ALWAYS_REDACTED_HEADERS, ...extraHeaders.map((h) => h.toLowerCase())])]
  return names.flatMap((name) => [
    `req.headers["${name}"]`,
    `res.headers["${name}"]`,
    `headers["${name}"]`,
  ])
}

export function loggerOptions (config: Config['logging']): LoggerOptions {
  return {
    level: config.level,
    base: { service: 'mcp-task-gateway' },
    redact: { paths: redactPaths(config.redactHeaders), censor: '[redacted]' },
    serializers: {
      req: (req: { method?: string, url?: string, headers?: Record<string, unknown>, id?: string }) => ({
        id: req.id,
        method: req.method,
        url: req.url,
        headers: req.headers,
      }),
    },
  }
}

export function createLogger (config: Config['logging'], destination?: DestinationStream): Logger {
  return destination ? pino(loggerOptions(config), destination) : pino(loggerOptions(config))
}
