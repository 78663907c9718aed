import { Writable } from 'node:stream'

/**
 * `logging.format: pretty`: each JSON line pino writes becomes one line a person reads at a terminal:
 * `2026-07-28T09:14:03.120Z WARN  upstream unavailable  upstream=search reason="connect failed: …"`. The
 * fields are those of the JSON line (redaction has run before), less the ones every line has; a request
 * shows as its method and URL, a response as its status, an error as its message with its stack below.
 */

const LEVELS: Readonly<Record<number, string>> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' }
/** Fields of every line, shown in the line's head or not at all. */
const HEAD_FIELDS = new Set(['level', 'time', 'msg', 'service', 'pid', 'hostname'])

type Entry = Record<string, unknown>

function shown (value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)
  return JSON.stringify(value) ?? String(value)
}

/** A field as `name=value`; `req`, `res` and `err` in their short forms. */
function field (name: string, value: unknown): string {
  if (name === 'req' && typeof value === 'object' && value !== null) {
    const { method, url } = value as { method?: unknown, url?: unknown }
    return `req=${shown(`${String(method)} ${String(url)}`)}`
  }
  if (name === 'res' && typeof value === 'object' && value !== null) return `status=${shown((value as { statusCode?: unknown }).statusCode)}`
  if (name === 'err' && typeof value === 'object' && value !== null) return `err=${shown((value as { message?: unknown }).message)}`
  return `${name}=${shown(value)}`
}

/** One JSON log line as a readable line (a line that is not JSON passes unchanged). */
export function prettyLine (json: string): string {
  let entry: Entry
  try {
    entry = JSON.parse(json) as Entry
  } catch {
    return json
  }
  if (typeof entry !== 'object' || entry === null) return json
  const time = typeof entry.time === 'number' ? new Date(entry.time).toISOString() : String(entry.time)
  const level = (LEVELS[entry.level as number] ?? String(entry.level)).padEnd(5)
  const fields = Object.entries(entry).filter(([name]) => !HEAD_FIELDS.has(name)).map(([name, value]) => field(name, value))
  const head = `${time} ${level} ${typeof entry.msg === 'string' ? entry.msg : ''}`
  const line = fields.length === 0 ? head : `${head}  ${fields.join(' ')}`
  const stack = (entry.err as { stack?: unknown } | undefined)?.stack
  return typeof stack === 'string' ? `${line}\n    ${stack.split('\n').join('\n    ')}` : line
}

/** A destination for pino that writes every line to `out` as prettyLine shows it. */
export function prettyDestination (out: { write (text: string): unknown }): Writable {
  return new Writable({
    write (chunk: Buffer | string, _encoding, done) {
      const lines = chunk.toString().split('\n').filter((line) => line !== '')
      out.write(lines.map((line) => `${prettyLine(line)}\n`).join(''))
      done()
    },
  })
}
