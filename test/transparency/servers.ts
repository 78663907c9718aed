// The foreign servers the transparency test compares, as published on the npm registry: how each is reached
// directly, how the gateway is configured in front of it (its only upstream, names passed through), and the
// arguments its tools get where a value made from the schema would not do.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { REPO_ROOT, startUpstream, type StartedUpstream } from '../fixtures/spawn-upstream.ts'

type Json = Record<string, unknown>

/** How a client reaches the server without the gateway. */
export type DirectTarget =
  | { kind: 'stdio', command: string, args: string[], env: Record<string, string> }
  | { kind: 'http', url: string }

/** One side of the comparison: the server reached directly, or through the gateway. */
export type Side = 'direct' | 'gateway'

/** A server's state for one side (its own directory, its own memory file), so the two sides never share it. */
export interface SideSetup {
  /** The directory this side's server works in (a path the normaliser replaces with `<dir>`). */
  dir: string
  /** The roots the side's client answers roots/list with. */
  roots: Array<{ uri: string, name: string }>
  /** Arguments of a tool where a value made from its schema would not do. */
  args: (tool: string) => Json | undefined
}

export interface RunningServer {
  direct: DirectTarget
  /** The upstream entry of the gateway's configuration (name `up`, prefix ''). */
  upstream: Json
  sides: Record<Side, SideSetup>
  close: () => Promise<void>
}

export interface ForeignServer {
  /** How the test and the allow-list name it. */
  id: string
  /** The npm package (pinned in devDependencies). */
  pkg: string
  start: () => Promise<RunningServer>
}

function bin (path: string): string {
  return join(REPO_ROOT, 'node_modules', path)
}

/** A fresh directory with one small file, the server's working directory for one side. */
function sideDir (id: string, side: Side): string {
  const dir = mkdtempSync(join(tmpdir(), `gw-transparency-${id}-${side}-`))
  mkdirSync(join(dir, 'sub'))
  writeFileSync(join(dir, 'note.txt'), 'first line\nsecond line\n')
  return dir
}

function stdioUpstream (command: string, args: string[], env: Record<string, string> = {}): Json {
  return { name: 'up', prefix: '', transport: 'stdio', command, args, env, timeouts: { connect: '60s' } }
}

function sides (id: string, args: (dir: string) => Record<string, Json>): Record<Side, SideSetup> {
  const make = (side: Side): SideSetup => {
    const dir = sideDir(id, side)
    const table = args(dir)
    return { dir, roots: [{ uri: pathToFileURL(dir).href, name: 'work' }], args: (tool) => table[tool] }
  }
  return { direct: make('direct'), gateway: make('gateway') }
}

function removeAll (all: Record<Side, SideSetup>): void {
  for (const side of Object.values(all)) rmSync(side.dir, { recursive: true, force: true })
}

const DATA_URI = 'data:text/plain;base64,aGVsbG8gdHJhbnNwYXJlbmN5'

/** server-everything's tools that need other values than their schema's first: short, offline, deterministic. */
const EVERYTHING_ARGS: Record<string, Json> = {
  'trigger-long-running-operation': { duration: 0.3, steps: 3 },
  'gzip-file-as-resource': { name: 'hello.txt.gz', data: DATA_URI, outputType: 'resource' },
  'trigger-sampling-request': { prompt: 'say hello', maxTokens: 10 },
  'simulate-research-query': { topic: 'transparency' },
  'get-resource-links': { count: 2 },
}

const everythingMain = bin('@modelcontextprotocol/server-everything/dist/index.js')

export const FOREIGN_SERVERS: ForeignServer[] = [
  {
    id: 'everything-stdio',
    pkg: '@modelcontextprotocol/server-everything',
    async start () {
      const all = sides('everything-stdio', () => EVERYTHING_ARGS)
      return {
        direct: { kind: 'stdio', command: process.execPath, args: [everythingMain, 'stdio'], env: {} },
        upstream: stdioUpstream(process.execPath, [everythingMain, 'stdio']),
        sides: all,
        close: async () => { removeAll(all) },
      }
    },
  },
  {
    id: 'everything-http',
    pkg: '@modelcontextprotocol/server-everything',
    async start () {
      // One server process per side: its session resources are tracked by URI across the sessions of a process,
      // so a session that registers one takes it from another session of the same process.
      const [direct, upstream]: StartedUpstream[] = await Promise.all([0, 1].map(async () =>
        await startUpstream('test/fixtures/everything-http.mjs', [], { readyTimeoutMs: 60_000 })))
      const all = sides('everything-http', () => EVERYTHING_ARGS)
      return {
        direct: { kind: 'http', url: (direct as StartedUpstream).url },
        upstream: { name: 'up', prefix: '', transport: 'streamable-http', url: (upstream as StartedUpstream).url, timeouts: { connect: '60s' } },
        sides: all,
        close: async () => {
          removeAll(all)
          await Promise.all([direct?.close(), upstream?.close()])
        },
      }
    },
  },
  {
    id: 'filesystem',
    pkg: '@modelcontextprotocol/server-filesystem',
    async start () {
      const main = bin('@modelcontextprotocol/server-filesystem/dist/index.js')
      const all = sides('filesystem', (dir) => {
        const note = join(dir, 'note.txt')
        return {
          read_file: { path: note },
          read_text_file: { path: note, head: 1 },
          read_media_file: { path: note },
          read_multiple_files: { paths: [note] },
          write_file: { path: join(dir, 'written.txt'), content: 'written' },
          edit_file: { path: join(dir, 'written.txt'), edits: [{ oldText: 'written', newText: 'edited' }], dryRun: true },
          create_directory: { path: join(dir, 'made') },
          list_directory: { path: dir },
          list_directory_with_sizes: { path: dir },
          directory_tree: { path: join(dir, 'sub') },
          move_file: { source: join(dir, 'written.txt'), destination: join(dir, 'moved.txt') },
          search_files: { path: dir, pattern: 'note' },
          get_file_info: { path: join(dir, 'sub') },
        }
      })
      // The server starts with the direct side's directory; each client's roots replace it with its own side's.
      return {
        direct: { kind: 'stdio', command: process.execPath, args: [main, all.direct.dir], env: {} },
        upstream: stdioUpstream(process.execPath, [main, all.gateway.dir]),
        sides: all,
        close: async () => { removeAll(all) },
      }
    },
  },
  {
    id: 'memory',
    pkg: '@modelcontextprotocol/server-memory',
    async start () {
      const main = bin('@modelcontextprotocol/server-memory/dist/index.js')
      const entity = { name: 'Ada', entityType: 'person', observations: ['writes programs'] }
      const all = sides('memory', () => ({
        create_entities: { entities: [entity, { ...entity, name: 'Charles' }] },
        create_relations: { relations: [{ from: 'Ada', to: 'Charles', relationType: 'knows' }] },
        add_observations: { observations: [{ entityName: 'Ada', contents: ['likes engines'] }] },
        delete_observations: { deletions: [{ entityName: 'Ada', observations: ['likes engines'] }] },
        search_nodes: { query: 'Ada' },
        open_nodes: { names: ['Ada'] },
      }))
      const env = (side: Side): Record<string, string> => ({ MEMORY_FILE_PATH: join(all[side].dir, 'memory.jsonl') })
      return {
        direct: { kind: 'stdio', command: process.execPath, args: [main], env: env('direct') },
        upstream: stdioUpstream(process.execPath, [main], env('gateway')),
        sides: all,
        close: async () => { removeAll(all) },
      }
    },
  },
  {
    id: 'sequential-thinking',
    pkg: '@modelcontextprotocol/server-sequential-thinking',
    async start () {
      const main = bin('@modelcontextprotocol/server-sequential-thinking/dist/index.js')
      const all = sides('sequential-thinking', () => ({
        sequentialthinking: { thought: 'first', nextThoughtNeeded: false, thoughtNumber: 1, totalThoughts: 1 },
      }))
      // Its thoughts are logged to stderr unless told not to; the output is the same either way.
      const env = { DISABLE_THOUGHT_LOGGING: 'true' }
      return {
        direct: { kind: 'stdio', command: process.execPath, args: [main], env },
        upstream: stdioUpstream(process.execPath, [main], env),
        sides: all,
        close: async () => { removeAll(all) },
      }
    },
  },
  {
    id: 'calc',
    pkg: '@coo-quack/calc-mcp',
    async start () {
      const main = bin('@coo-quack/calc-mcp/dist/index.js')
      // Values whose answers do not depend on the clock or on chance.
      const all = sides('calc', () => ({
        random: { type: 'number', min: 4, max: 4 },
        datetime: { action: 'timestamp', timestamp: '1700000000', timezone: 'UTC' },
        math: { expression: '2 + 3 * 4' },
        date: { action: 'weekday', date: '2026-01-01' },
        regex: { pattern: 'b+', text: 'abbbc', action: 'match' },
        cron_parse: { expression: '0 12 * * 1', count: 2, timezone: 'UTC' },
        ip: { action: 'info', ip: '192.168.1.10' },
        convert: { value: 1, from: 'km', to: 'm' },
        semver: { action: 'compare', version: '1.2.3', version2: '1.10.0' },
        url_parse: { url: 'https://example.org/a?b=c#d' },
        jwt_decode: { token: 'eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.' },
        base: { value: '255', from: 10, to: 16 },
        color: { color: '#ff8800' },
        luhn: { number: '79927398713' },
        format_validate: { input: '{"a":1}', format: 'json' },
        hash: { input: 'abc', algorithm: 'sha256' },
        char_info: { char: 'é' },
      }))
      return {
        direct: { kind: 'stdio', command: process.execPath, args: [main], env: {} },
        upstream: stdioUpstream(process.execPath, [main]),
        sides: all,
        close: async () => { removeAll(all) },
      }
    },
  },
]
