import { z } from 'zod'
import type { JsonObject } from '../wire/jsonrpc.ts'
import { TASK_STATUSES } from '../wire/task-state.ts'
import type { BusHandler, SignalBus } from './types.ts'

/**
 * One channel of the signal bus between gateway processes: its name, the version of its payload, what
 * the key of a keyed channel names (a task id, a process id, …; null for one channel shared by all), who
 * speaks on it and why, and the schema every payload must meet. A change of a payload's shape takes the
 * next version: the version is part of the name on the bus, so processes of two releases side by side (a
 * rolling upgrade) do not hear each other on that channel rather than misread each other.
 */
export interface BusChannel<P extends object> {
  readonly name: string
  readonly version: number
  readonly key: string | null
  readonly carries: string
  readonly schema: z.ZodType<P>
}

function channel<P extends object> (
  name: string, version: number, key: string | null, carries: string, schema: z.ZodType<P>,
): BusChannel<P> {
  return Object.freeze({ name, version, key, carries, schema })
}

const jsonObject = z.record(z.string(), z.unknown()) as unknown as z.ZodType<JsonObject>
const requestId = z.union([z.string(), z.number()])

/** Every channel between gateway processes. docs/operations.md lists this table (a test keeps it so). */
export const BUS = Object.freeze({
  peer: channel('peer', 1, 'process id', 'requests between processes (a client\'s request run on its home process, a question for a client, the retry of a held call), their events, replies and aborts', z.discriminatedUnion('type', [
    z.object({ type: z.literal('request'), id: z.string(), kind: z.string(), from: z.string(), payload: jsonObject }),
    z.object({ type: z.literal('abort'), id: z.string() }),
    z.object({ type: z.literal('event'), id: z.string(), event: jsonObject }),
    z.object({ type: z.literal('reply'), id: z.string(), result: jsonObject.optional(), error: jsonObject.optional() }),
  ])),
  session: channel('session', 1, 'session id', 'a message for the session\'s GET stream, or that the session read a list', z.union([
    z.object({ message: jsonObject }),
    z.object({ listed: z.string() }),
  ])),
  task: channel('task', 1, 'task id', 'a task changed status: wakes a waiting tasks/result and subscriptions/listen', z.object({ type: z.literal('status'), status: z.enum(TASK_STATUSES) })),
  taskStream: channel('task-stream', 1, 'task id', 'a message of a task for the processes holding its tasks/result streams (or a probe: is one held?)', z.union([
    z.object({ probe: z.literal(true) }),
    z.object({ message: jsonObject, sessionId: z.string() }),
  ])),
  taskCancel: channel('cancel', 1, 'task id', 'cancel the task\'s upstream call (or stop waiting: another process resumed it)', z.object({ taskId: z.string(), handover: z.boolean().optional() })),
  input: channel('input', 1, 'input key', 'an answer to a queued input request was stored', z.object({ key: z.string() })),
  takeover: channel('takeover', 1, null, 'a process left: the others look for its tasks at once', z.object({ from: z.string() })),
  getStream: channel('legacy-get-stream', 1, null, 'a session opened a GET stream on the process whose delivery id is `from`', z.object({ sessionId: z.string(), from: z.string() })),
  offer: channel('legacy-offer', 1, 'delivery id', 'an unanswered input request to offer on a GET stream held there', z.object({ sessionId: z.string(), message: jsonObject })),
  offered: channel('legacy-offered', 1, 'input key', 'a probe: is the input request still offered on a stream held open? (or: it was settled, let it go)', z.union([
    z.object({ probe: z.literal(true) }),
    z.object({ settled: z.literal(true) }),
  ])),
  requestCancel: channel('legacy-cancel', 1, null, 'a client cancelled a request another process runs', z.object({ sessionId: z.string(), requestId, reason: z.string() })),
  clients: channel('clients', 1, null, 'a client ended, or sent its upstream sessions a notification', z.discriminatedUnion('type', [
    z.object({ type: z.literal('ended'), clientKey: z.string() }),
    z.object({ type: z.literal('notify'), clientKey: z.string(), method: z.string(), params: jsonObject }),
  ])),
  listChanged: channel('list-changed', 1, null, 'the lists every client starts from changed', z.object({ method: z.string() })),
  adminTasks: channel('admin-tasks', 1, null, 'a task changed, for the admin dashboards of every process', z.object({ change: z.string(), task: jsonObject, progress: jsonObject.optional() })),
})

export type BusChannelName = keyof typeof BUS
export type PayloadOf<C> = C extends BusChannel<infer P> ? P : never

const byWireName = new Map<string, BusChannel<object>>(Object.values(BUS).map((entry) => [`${entry.name}.v${entry.version}`, entry]))

/** The channel's name on the bus, with its version and, for a keyed channel, the key. */
export function wireName (entry: BusChannel<object>, key?: string): string {
  const base = `${entry.name}.v${entry.version}`
  return entry.key === null ? base : `${base}:${key ?? ''}`
}

/** Whether `payload` meets the schema of the channel named `wire` on the bus (false for a channel not in the table). */
export function checkBusPayload (wire: string, payload: unknown): boolean {
  const colon = wire.indexOf(':')
  const entry = byWireName.get(colon < 0 ? wire : wire.slice(0, colon))
  if (entry === undefined || (entry.key === null) !== (colon < 0)) return false
  return entry.schema.safeParse(payload).success
}

/** Publishes on a channel of the table (`key` for a keyed one); resolves with how many processes received it. */
export async function publishOn<C extends BusChannel<object>> (
  bus: SignalBus, entry: C, key: string | undefined, payload: PayloadOf<C>,
): Promise<number> {
  return await bus.publish(wireName(entry, key), payload as unknown as JsonObject)
}

/**
 * Subscribes to a channel of the table; returns the unsubscribe function. On a shared bus, a payload
 * reaches `handler` only once it met the channel's schema (SignedBus); in one process it was written by
 * this code, typed.
 */
export function subscribeTo<C extends BusChannel<object>> (
  bus: SignalBus, entry: C, key: string | undefined, handler: (payload: PayloadOf<C>) => void,
): () => void {
  return bus.subscribe(wireName(entry, key), handler as unknown as BusHandler)
}

/** The fields of a payload schema, for the documentation: `{ a, b? }`, alternatives joined by "or". */
function fieldsOf (schema: z.ZodType): string {
  if (schema instanceof z.ZodUnion) return (schema.options as z.ZodType[]).map(fieldsOf).join(' or ')
  if (!(schema instanceof z.ZodObject)) return 'JSON'
  const shape = schema.shape as Record<string, z.ZodType>
  return `{ ${Object.entries(shape).map(([name, field]) => field.safeParse(undefined).success ? `${name}?` : name).join(', ')} }`
}

/** The table as the Markdown docs/operations.md shows (a test keeps the page the same). */
export function busChannelTable (): string {
  const rows = Object.values(BUS).map((entry) => {
    const name = wireName(entry, entry.key === null ? undefined : `<${entry.key}>`)
    return `| \`${name}\` | ${entry.carries} | \`${fieldsOf(entry.schema)}\` |`
  })
  return ['| channel | carries | payload |', '|---|---|---|', ...rows].join('\n')
}
