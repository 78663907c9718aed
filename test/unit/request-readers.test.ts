// A POSTed body is read once, by classifyPost (src/wire/classified-message.ts), and everything after the route
// (limits, metrics, tracing, the endpoints) works from that classification. These checks keep a second, partial
// reader of the raw body from coming back: each would read the body a little differently from the others.
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = join(import.meta.dirname, '..', '..')
const src = join(root, 'src')

function sourceFiles (dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return entry.name.endsWith('.ts') ? [path] : []
  })
}

/** Each file of src/ (the demo upstream, a program of its own, left out) with its text, by its path below src/. */
const files = sourceFiles(src)
  .map((path) => ({ path: relative(src, path), text: readFileSync(path, 'utf8') }))
  .filter(({ path }) => !path.startsWith('demo/'))

/** Where `pattern` occurs in src/: `file:line` for each occurrence. */
function occurrences (pattern: RegExp): string[] {
  const found: string[] = []
  for (const { path, text } of files) {
    text.split('\n').forEach((line, index) => {
      if (pattern.test(line)) found.push(`${path}:${index + 1}`)
    })
  }
  return found
}

const fileOf = (place: string): string => place.slice(0, place.lastIndexOf(':'))

describe('the one reading of a POSTed body', () => {
  it('leaves the raw body to the route, which hands it to classifyPost and to nothing else', () => {
    // The admin API's own routes (drain, reload) read bodies of their own, not MCP messages.
    const places = occurrences(/request\.body\b/).filter((place) => !place.startsWith('admin/'))
    expect(places).toHaveLength(1)
    expect(places[0]).toMatch(/^http\/mcp-route\.ts:/)
    const route = files.find(({ path }) => path === 'http/mcp-route.ts')!.text
    expect(route).toMatch(/classifyPost\(request\.body, /)
  })

  it('classifies JSON-RPC messages only in classifyPost, and in the broker for answers relayed by another process', () => {
    // client-requests.ts reads an answer another gateway process relayed over the bus: not a body this process was posted.
    const callers = occurrences(/\bclassifyMessage\(/).map(fileOf)
    expect(new Set(callers)).toEqual(new Set(['wire/classified-message.ts', 'protocol/2025-11-25/client-requests.ts']))
  })

  it('takes the era from the classification: only classifyPost looks for the protocol version claim', () => {
    expect(occurrences(/PROTOCOL_VERSION_KEY in\b/).map(fileOf)).toEqual(['wire/classified-message.ts'])
    expect(occurrences(/\bisModernMessage\b/)).toEqual([])
  })

  it('has no part of the request path take a raw body: the limiter, metrics, tracing and endpoints take the classified message', () => {
    const readers = occurrences(/\bbody\??: unknown\b/).filter((place) => !place.startsWith('wire/'))
    expect(readers).toEqual([])
  })
})
