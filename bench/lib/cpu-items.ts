// Itemises a V8 CPU profile of the gateway (a .cpuprofile, from the bench probe or `node --cpu-prof`) into the
// parts of a request's work: a sample belongs to a subsystem (store, auth, metrics, tracing, logging, zod) when
// one of its frames is anywhere on the stack, else to the layer of its innermost frame that a layer owns (so the
// JSON.stringify a renderer calls is the renderer's, the one Fastify calls is Fastify's). bench/cpu-per-request.ts divides the parts
// by the requests of the profiled window: CPU µs per request by part.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

interface CallFrame { functionName: string, url: string }
interface ProfileNode { id: number, callFrame: CallFrame, children?: number[] }
interface Profile { nodes: ProfileNode[], samples: number[], timeDeltas: number[], startTime: number, endTime: number }

/** A part of the work and the frames it owns (tested on the function name and the url of a frame). */
type Rule = [part: string, owns: (frame: CallFrame) => boolean]

/** The gateway's own code, run from src/ (tsx) or compiled file for file into dist/. */
const ours = (f: CallFrame): boolean => /\/(src|dist)\//.test(f.url) && !f.url.includes('node_modules')
const src = (folder: string) => (f: CallFrame): boolean => ours(f) && (f.url.includes(`/src/${folder}`) || f.url.includes(`/dist/${folder}`))
const pkg = (pattern: RegExp) => (f: CallFrame): boolean => pattern.test(f.url)

/**
 * Subsystems: a sample with one of their frames anywhere on its stack is theirs (what a store read calls, down
 * to the socket write, is the store read's). The first rule that owns any frame of the stack wins.
 */
const SUBSYSTEMS: readonly Rule[] = [
  ['garbage collection', (f) => f.functionName === '(garbage collector)'],
  ['store read (src/store, its driver)', (f) => src('store/')(f) || pkg(/node_modules\/(better-sqlite3|ioredis|@ioredis|redis-parser|pg|pg-protocol|pg-pool)\//)(f)],
  ['auth (src/auth)', src('auth/')],
  ['metrics (prom-client, src/observability/metrics)', (f) => pkg(/node_modules\/prom-client\//)(f) || (ours(f) && /\/observability\/(metrics|bucket-histogram)/.test(f.url))],
  ['tracing (opentelemetry, request trace)', (f) => pkg(/node_modules\/@opentelemetry\//)(f) || (ours(f) && /\/observability\/(tracing|trace-context|request-trace)/.test(f.url))],
  ['logging (pino, access log)', (f) => pkg(/node_modules\/(pino|pino-std-serializers|sonic-boom|thread-stream)\//)(f) || src('observability/')(f)],
  ['zod validation', pkg(/node_modules\/zod\//)],
]

/** Layers: the rest goes to the innermost frame that one of them owns (its own work and the builtins it called). */
const LAYERS: readonly Rule[] = [
  ['task service (src/tasks, src/calls)', (f) => src('tasks/')(f) || src('calls/')(f)],
  ['rendering a task, JSON-RPC shapes (src/wire)', src('wire/')],
  ['protocol: classify, envelope, session (src/protocol)', src('protocol/')],
  ['dispatch (src/dispatch)', src('dispatch/')],
  ['gateway route, guards, exchange (src/http, src/streams, src/limits)', (f) => src('http/')(f) || src('streams/')(f) || src('limits/')(f)],
  ['other gateway code (src/)', ours],
  ['body parse (secure-json-parse, content-type parser)', pkg(/node_modules\/(secure-json-parse\/|fastify\/lib\/content-type-parser)/)],
  ['Fastify routing, hooks, reply', pkg(/node_modules\/(fastify|find-my-way|@fastify|avvio|fast-json-stringify|light-my-request|toad-cache|fast-querystring)\//)],
  ['other packages', pkg(/node_modules\//)],
  ['node http, net, streams, timers', (f) => f.url.startsWith('node:')],
]
const UNOWNED = 'V8 and native (no JS frame owns it)'

export interface Itemised {
  /** µs of busy (non-idle) time by part. */
  parts: Map<string, number>
  busyUs: number
}

/** Busy time of a profile by part of the work (see SUBSYSTEMS and LAYERS). */
export function itemise (file: string): Itemised {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  for (const node of profile.nodes) {
    if (node.callFrame.url.startsWith('file://')) node.callFrame.url = fileURLToPath(node.callFrame.url)
  }
  const durations = profile.timeDeltas.slice(1).concat([(profile.endTime - profile.startTime) / Math.max(1, profile.samples.length)])
  // A node's part does not depend on the sample: work it out once per node.
  const partOf = new Map<number, string>()
  const resolve = (id: number): string => {
    let part = partOf.get(id)
    if (part !== undefined) return part
    const stack: CallFrame[] = []
    for (let cursor: number | undefined = id; cursor !== undefined; cursor = parent.get(cursor)) stack.push(byId.get(cursor)!.callFrame)
    part = SUBSYSTEMS.find(([, owns]) => stack.some(owns))?.[0]
    for (const frame of stack) {
      if (part !== undefined) break
      part = LAYERS.find(([, owns]) => owns(frame))?.[0]
    }
    part ??= UNOWNED
    partOf.set(id, part)
    return part
  }
  const parts = new Map<string, number>()
  let busyUs = 0
  profile.samples.forEach((id, i) => {
    const name = byId.get(id)!.callFrame.functionName
    if (name === '(idle)') return
    const us = durations[i]!
    busyUs += us
    const part = name === '(program)' ? UNOWNED : resolve(id)
    parts.set(part, (parts.get(part) ?? 0) + us)
  })
  return { parts, busyUs }
}

/** Every part's name, in the order of the rules (the order a table lists them in). */
export const PARTS: readonly string[] = [...SUBSYSTEMS, ...LAYERS].map(([part]) => part).concat(UNOWNED)
