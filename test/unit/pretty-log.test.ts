import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/load.ts'
import { createLogger } from '../../src/observability/logger.ts'

/** The gateway's own logger, configured from YAML-shaped input, writing into an array of lines. */
function loggerFor (logging: Record<string, unknown>): { log: ReturnType<typeof createLogger>, lines: string[] } {
  const config = parseConfig({ logging, store: { kind: 'memory' }, upstreams: [{ name: 'demo', transport: 'stdio', command: 'node' }] }, {})
  const lines: string[] = []
  const sink = new Writable({
    write (chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''))
      done()
    },
  })
  return { log: createLogger(config.logging, sink as unknown as { write (text: string): void }), lines }
}

describe('logging.format: pretty', () => {
  it('writes one readable line per entry: time, level, message, then the fields', () => {
    const { log, lines } = loggerFor({ format: 'pretty' })
    log.warn({ upstream: 'search', reason: 'connect failed: connection refused', retryInMs: 500 }, 'upstream unavailable')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z WARN {2}upstream unavailable {2}upstream=search reason="connect failed: connection refused" retryInMs=500$/)
  })

  it('shows a request by its method and path, a response by its status, and redacts as the JSON lines do', () => {
    const { log, lines } = loggerFor({ format: 'pretty' })
    log.info({ req: { method: 'POST', url: '/mcp', headers: { authorization: 'Bearer sk-SECRET' } }, res: { statusCode: 200 } }, 'request completed')
    expect(lines[0]).toContain('INFO  request completed  req="POST /mcp" status=200')
    expect(lines.join('\n')).not.toContain('sk-SECRET')
  })

  it('puts an error\'s stack under its line', () => {
    const { log, lines } = loggerFor({ format: 'pretty' })
    log.error({ err: new Error('boom') }, 'task runner failed')
    expect(lines[0]).toContain('ERROR task runner failed  err=boom')
    expect(lines[1]).toMatch(/^ {4}Error: boom$/)
  })

  it('stays JSON by default', () => {
    const { log, lines } = loggerFor({})
    log.info({ upstream: 'search' }, 'upstream connected')
    expect(JSON.parse(lines[0]!)).toMatchObject({ msg: 'upstream connected', upstream: 'search', level: 30 })
  })
})
