// Summarises a V8 .cpuprofile (from BENCH_PROFILE_DIR or `node --cpu-prof`): where the sampled CPU
// time went, by module group and by function (self time), and the heaviest call paths' functions
// (inclusive time).
//
//   npx tsx bench/tools/cpuprofile-top.ts <file.cpuprofile> [top=30] [--callers=<functionName>]
//
// --callers lists the heaviest stacks (innermost 8 frames) in which <functionName> has self time.
// Always printed first: busy time split into the stages of a relayed call, by heuristic rules on each
// sample's stack (first matching rule wins; see BUCKETS).
import { existsSync, readFileSync } from 'node:fs'
import { SourceMap } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { relative } from 'node:path'

interface CallFrame { functionName: string, url: string, lineNumber: number, columnNumber: number }
interface ProfileNode { id: number, callFrame: CallFrame, children?: number[] }
interface Profile { nodes: ProfileNode[], samples: number[], timeDeltas: number[], startTime: number, endTime: number }

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SPECIAL = new Set(['(idle)', '(program)', '(garbage collector)', '(root)'])

/** The source maps of the files of dist/ that have one, read once each (undefined: none). */
const maps = new Map<string, SourceMap | undefined>()

function sourceMap (url: string): SourceMap | undefined {
  if (!maps.has(url)) {
    const file = `${fileURLToPath(url)}.map`
    maps.set(url, existsSync(file) ? new SourceMap(JSON.parse(readFileSync(file, 'utf8')) as ConstructorParameters<typeof SourceMap>[0]) : undefined)
  }
  return maps.get(url)
}

/**
 * The gateway runs compiled from dist/: a program written as one file with its packages (dist/main.js, see
 * scripts/build.ts) has its frames named by the file they come from, src/… or node_modules/…, through the
 * file's source map (lines too); a file compiled file for file by its source file (line numbers are the
 * compiled file's, close to the source's).
 */
function asSource (frame: CallFrame): void {
  const dist = `${pathToFileURL(ROOT).href}dist/`
  if (!frame.url.startsWith(dist)) return
  const entry = sourceMap(frame.url)?.findEntry(frame.lineNumber, frame.columnNumber)
  if (entry !== undefined && 'originalSource' in entry) {
    frame.url = new URL(entry.originalSource, frame.url).href
    frame.lineNumber = entry.originalLine
    frame.columnNumber = entry.originalColumn
    return
  }
  frame.url = `${pathToFileURL(ROOT).href}src/${frame.url.slice(dist.length).replace(/\.js$/, '.ts')}`
}

function location (frame: CallFrame): string {
  if (frame.url === '') return ''
  let path = frame.url
  if (path.startsWith('file://')) path = relative(ROOT, fileURLToPath(path))
  const modules = path.lastIndexOf('node_modules/')
  if (modules >= 0) path = path.slice(modules + 'node_modules/'.length)
  return `${path}:${frame.lineNumber + 1}`
}

/** node_modules package, src/ file's folder, node internal area, or a VM bucket. */
function group (frame: CallFrame): string {
  if (SPECIAL.has(frame.functionName) && frame.url === '') return frame.functionName
  const url = frame.url
  if (url === '') return '(native / V8 builtins)'
  if (url.startsWith('node:')) {
    const parts = url.slice(5).split('/')
    return `node:${parts[0] === 'internal' ? parts.slice(0, 2).join('/') : parts[0]}`
  }
  const path = url.startsWith('file://') ? fileURLToPath(url) : url
  const modules = path.lastIndexOf('node_modules/')
  if (modules >= 0) {
    const rest = path.slice(modules + 'node_modules/'.length).split('/')
    const pkg = rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!
    // split the MCP SDK packages by their dist file: they hold most of the relaying work
    return pkg.startsWith('@modelcontextprotocol/') ? `${pkg} (${rest.at(-1)})` : pkg
  }
  return relative(ROOT, path)
}

type Stack = CallFrame[]
const has = (stack: Stack, test: (f: CallFrame) => boolean): boolean => stack.some(test)
/** Stages of a relayed tools/call; the first matching rule wins, so order matters. */
const BUCKETS: Array<[string, (stack: Stack) => boolean]> = [
  ['garbage collection', (s) => s[0]!.functionName === '(garbage collector)'],
  ['upstream: SSE response parsing (SDK processStream, TextDecoderStream, EventSourceParserStream)',
    (s) => has(s, (f) => /^(processStream|_handleSseStream)$/.test(f.functionName) || /eventsource-parser|webstreams\/encoding/.test(f.url))],
  ['upstream: undici fetch() request (Request, body stream, clone/tee, abort listeners)',
    (s) => has(s, (f) => f.url.includes('undici/lib/web/fetch') && !/^on(Headers|Data|Complete|Error)$/.test(f.functionName)) &&
      has(s, (f) => f.functionName === '_send' || f.url.includes('src/upstream/'))],
  ['upstream: undici sockets and response streams (client-h1, fetch callbacks, web streams)',
    (s) => has(s, (f) => f.url.includes('/undici/') || f.url.includes('webstreams') || f.url.includes('js_transferable'))],
  ['upstream: SDK client protocol (request/response mapping, zod, timeouts)',
    (s) => has(s, (f) => f.url.includes('@modelcontextprotocol/') || f.url.includes('/zod/'))],
  ['downstream: writing the response (PostExchange.respond → socket)', (s) => has(s, (f) => f.functionName === 'respond' && f.url.includes('post-exchange'))],
  ['downstream: fastify routing, body parsing, node http server', (s) => has(s, (f) => /fastify|secure-json-parse|find-my-way|_http_server|_http_incoming|pino/.test(f.url))],
  ['gateway logic (src/: session lookup, in-flight registry, pool lease, call engine)', (s) => has(s, (f) => f.url.includes('/src/'))],
  ['other (microtask plumbing, V8, unattributed)', () => true],
]

function pct (value: number, total: number): string {
  return `${(100 * value / total).toFixed(1).padStart(5)} %`
}

function main (): void {
  const args = process.argv.slice(2)
  const callersOf = args.find((a) => a.startsWith('--callers='))?.slice('--callers='.length)
  const [file, topArg] = args.filter((a) => !a.startsWith('--'))
  if (file === undefined) throw new Error('usage: cpuprofile-top <file.cpuprofile> [top] [--callers=<functionName>]')
  const top = Number(topArg ?? 30)
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
  for (const node of profile.nodes) asSource(node.callFrame)
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)

  // Duration of sample i = time until sample i + 1 (the last one gets the mean).
  const durations = profile.timeDeltas.slice(1).concat([0])
  const mean = (profile.endTime - profile.startTime) / Math.max(1, profile.samples.length)
  durations[durations.length - 1] = mean

  const self = new Map<number, number>()
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + durations[i]!))
  let idle = 0
  let total = 0
  for (const [id, us] of self) {
    total += us
    if (byId.get(id)!.callFrame.functionName === '(idle)') idle += us
  }
  const busy = total - idle

  const buckets = new Map<string, number>()
  profile.samples.forEach((id, i) => {
    if (byId.get(id)!.callFrame.functionName === '(idle)') return
    const stack: Stack = []
    for (let cursor: number | undefined = id; cursor !== undefined; cursor = parent.get(cursor)) stack.push(byId.get(cursor)!.callFrame)
    const name = BUCKETS.find(([, test]) => test(stack))![0]
    buckets.set(name, (buckets.get(name) ?? 0) + durations[i]!)
  })

  const key = (frame: CallFrame): string => `${frame.functionName || '(anonymous)'}  ${location(frame)}`
  const selfByFunction = new Map<string, number>()
  const selfByGroup = new Map<string, number>()
  const inclusive = new Map<string, number>()
  for (const [id, us] of self) {
    const frame = byId.get(id)!.callFrame
    if (frame.functionName === '(idle)') continue
    selfByFunction.set(key(frame), (selfByFunction.get(key(frame)) ?? 0) + us)
    selfByGroup.set(group(frame), (selfByGroup.get(group(frame)) ?? 0) + us)
    const seen = new Set<string>()
    for (let cursor: number | undefined = id; cursor !== undefined; cursor = parent.get(cursor)) {
      const f = byId.get(cursor)!.callFrame
      if (f.functionName === '(root)') continue
      const k = key(f)
      if (seen.has(k)) continue
      seen.add(k)
      inclusive.set(k, (inclusive.get(k) ?? 0) + us)
    }
  }

  const print = (title: string, entries: Map<string, number>, limit: number): void => {
    process.stdout.write(`\n${title}\n`)
    for (const [name, us] of [...entries].sort((a, b) => b[1] - a[1]).slice(0, limit)) {
      process.stdout.write(`  ${(us / 1000).toFixed(1).padStart(9)} ms ${pct(us, busy)}  ${name}\n`)
    }
  }
  process.stdout.write(`${file}\n  sampled ${(total / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms, busy ${(busy / 1000).toFixed(0)} ms (percentages are of busy time)\n`)
  print('busy time by stage of the relayed call (heuristic, by stack)', buckets, BUCKETS.length)
  print('self time by module group', selfByGroup, top)
  print('self time by function', selfByFunction, top)
  print('inclusive time by function (gateway sources only)', new Map([...inclusive].filter(([k]) => k.includes('  src/'))), top)
  print('inclusive time by function (all)', inclusive, top)

  if (callersOf !== undefined) {
    const stacks = new Map<string, number>()
    for (const [id, us] of self) {
      if (byId.get(id)!.callFrame.functionName !== callersOf) continue
      const frames: string[] = []
      for (let cursor = parent.get(id); cursor !== undefined && frames.length < 8; cursor = parent.get(cursor)) {
        const f = byId.get(cursor)!.callFrame
        if (f.functionName !== '(root)') frames.push(key(f))
      }
      const stack = frames.join('\n      ← ')
      stacks.set(stack, (stacks.get(stack) ?? 0) + us)
    }
    print(`heaviest callers of ${callersOf}`, stacks, 8)
  }
}

main()
