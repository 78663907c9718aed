// Compares the transcripts of one scripted session run directly and through the gateway, item by item, and
// scans what the client received through the gateway for anything of the gateway's own.
import { ALLOW_LIST, type AllowEntry } from './allow-list.ts'
import { Normaliser } from './normalise.ts'
import type { Transcript } from './script.ts'
import type { Era, RecordedSession } from './sessions.ts'

type Json = Record<string, unknown>

export interface Difference {
  server: string
  era: Era
  item: string
  direct: string
  gateway: string
  /** The allow-list entry that explains it, if any. */
  allowed?: AllowEntry
}

export interface Comparison {
  compared: number
  differences: Difference[]
}

/** The notifications a client received (progress is kept with its call) and the requests it was asked, as items. */
export function addReceived (transcript: Transcript, recorded: RecordedSession): void {
  const notifications = recorded.inbound.filter((m) => m.id === undefined && typeof m.method === 'string' && m.method !== 'notifications/progress')
  transcript.set('notifications', [...new Set(notifications.map((m) => String(m.method)))].sort())
  // How often each request was asked (a request asked twice asks a person twice), and what it asked.
  const byMethod = new Map<string, unknown[]>()
  for (const { method, params } of recorded.asked) byMethod.set(method, [...(byMethod.get(method) ?? []), params ?? null])
  for (const [method, asked] of byMethod) {
    transcript.set(`requests/${method}`, asked.length)
    transcript.set(`requests/${method}#params`, [...new Set(asked.map((params) => JSON.stringify(params)))].sort().map((text) => JSON.parse(text) as unknown))
  }
}

function glob (pattern: string, text: string): boolean {
  const source = pattern.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')
  return new RegExp(`^${source}$`).test(text)
}

export function allowedBy (server: string, era: Era, item: string): AllowEntry | undefined {
  return ALLOW_LIST.find((e) =>
    [e.server].flat().some((s) => glob(s, server)) && (e.era === undefined || e.era === era) && glob(e.item, item))
}

/** One side's transcript and the directories its normaliser replaces. */
export interface SideTranscript {
  transcript: Transcript
  dirs: string[]
}

export function compare (server: string, era: Era, direct: SideTranscript, gateway: SideTranscript): Comparison {
  const left = new Normaliser(direct.dirs)
  const right = new Normaliser(gateway.dirs)
  const items = [...new Set([...direct.transcript.keys(), ...gateway.transcript.keys()])].sort()
  const differences: Difference[] = []
  for (const item of items) {
    const a = direct.transcript.has(item) ? left.text(direct.transcript.get(item)) : '(absent)'
    const b = gateway.transcript.has(item) ? right.text(gateway.transcript.get(item)) : '(absent)'
    if (a === b) continue
    const allowed = allowedBy(server, era, item)
    differences.push({ server, era, item, direct: a, gateway: b, ...(allowed && { allowed }) })
  }
  return { compared: items.length, differences }
}

/** Keys, header names and methods that belong to the gateway alone and must never reach a client. */
const INTERNAL = [/io\.mcp-task-gateway/i, /x-mcp-gateway/i]
const RELATED_TASK = 'io.modelcontextprotocol/related-task'

/** The task ids a message names: a task status's own, and those of related-task metadata anywhere in it. */
function taskIdsIn (message: Json): string[] {
  const ids: string[] = []
  if (message.method === 'notifications/tasks/status') ids.push(String((message.params as Json | undefined)?.taskId))
  const text = JSON.stringify(message)
  for (const match of text.matchAll(new RegExp(`"${RELATED_TASK}":\\{"taskId":"([^"]*)"`, 'g'))) ids.push(String(match[1]))
  if (text.includes(RELATED_TASK) && ids.length === 0) ids.push('(unreadable)')
  return ids
}

/**
 * What the client received through the gateway that is the gateway's own: an internal `_meta` key or header
 * anywhere, or a task status or related-task metadata of a task the client did not create (`ownTasks`: the
 * tasks it did), which could only be one it never saw.
 */
export function leaks (recorded: RecordedSession, ownTasks: ReadonlySet<string> = new Set()): string[] {
  const found: string[] = []
  for (const message of recorded.inbound) {
    const text = JSON.stringify(message)
    if (INTERNAL.some((marker) => marker.test(text))) found.push(`internal key in ${text.slice(0, 300)}`)
    for (const id of taskIdsIn(message)) {
      if (!ownTasks.has(id)) found.push(`task ${id}, which the client never created, in ${text.slice(0, 300)}`)
    }
  }
  for (const name of recorded.headerNames) if (INTERNAL.some((marker) => marker.test(name))) found.push(`internal response header ${name}`)
  return found
}
