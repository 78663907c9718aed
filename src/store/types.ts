import type { JsonObject } from '../wire/jsonrpc.ts'
import type { SessionStore } from './session-types.ts'
import type { TaskStatus } from '../wire/task-state.ts'
import type { WireError } from '../errors.ts'
import type { DataLossWatch } from './data-loss.ts'
import type { Revision } from '../wire/versions.ts'

/**
 * The store contract. Every gateway process talks to shared state only through this interface, so
 * that any process can serve any request. All stored data is JSON-serialisable. Stores throw the
 * gateway's own error codes, never a backend's message.
 *
 * Not in the contract: transactions, connections or any backend type.
 */

export type { SessionCreateOptions, SessionRecord, SessionStore } from './session-types.ts'

/** The raw outcome of the upstream call, exactly as the upstream answered. */
export type TaskOutcome = { result: JsonObject } | { error: WireError }

/**
 * What another gateway process needs to reach the upstream work of a running task again, after the process
 * that started it stopped: the upstream's own task, and the upstream session it lives in. A task that has it
 * is adopted by the process taking it over (it asks the upstream for the task's outcome) instead of failed.
 */
export type TaskResume = NativeTaskResume | StreamResume

/**
 * The upstream work a task's call may start: its call waited for a call slot and has not left the gateway yet
 * (written with the "queued" statusMessage, cleared before the request is sent). A process that takes the task over
 * starts the call itself instead of failing it: nothing of it ran upstream.
 */
export interface UnsentCall {
  kind: 'unsent'
}

/** The upstream session the upstream work belongs to. */
export interface ResumeAddress {
  /** Its Mcp-Session-Id; null when the upstream has none. */
  sessionId: string | null
  /** The protocol version negotiated on that session, sent again on every request of a new owner. */
  protocolVersion: string
  /** The revision that session speaks. */
  era: Revision
}

/** The upstream runs the call as a task of its own. */
export interface NativeTaskResume extends ResumeAddress {
  kind: 'native'
  /** The upstream's own task id. */
  upstreamTaskId: string
}

/** A plain call whose response stream the upstream can replay (SSE event ids, Last-Event-ID). */
export interface StreamResume extends ResumeAddress {
  kind: 'stream'
  /** Where the stream is replayed from: the call's JSON-RPC id and the first event id, opaque to the store. */
  resumptionToken: string
}

/** A durable task over one upstream tools/call, in a neutral (era-independent) form. */
export interface TaskRecord {
  /** CSPRNG id, at least 128 bits. */
  id: string
  principal: string
  /** The 2025-11-25 session that created it, for notifications; null for 2026-07-28. */
  sessionId: string | null
  /** The protocol revision of the request that created it. */
  era: Revision
  status: TaskStatus
  statusMessage: string | null
  /** Epoch milliseconds. */
  createdAt: number
  lastUpdatedAt: number
  /** Retention from createdAt; null is unlimited. */
  ttlMs: number | null
  pollIntervalMs: number
  /** The configured upstream name and the upstream's own tool name. */
  upstream: string
  tool: string
  /**
   * What the client asked for: arguments and `_meta` (without the task and progress token). Kept only while
   * the task runs (a task run again after a takeover needs it): every store clears it to `{}` in the same
   * step that makes the task terminal.
   */
  request: JsonObject
  progressToken: string | number | null
  /** The client's capabilities when it created the task: what may be relayed to it. */
  clientCapabilities: JsonObject
  outcome: TaskOutcome | null
  /** The gateway process that runs (or last ran) the task's upstream call; it renews a lease while alive. */
  owner: string
  /**
   * The W3C `traceparent` of the span that created the task (tracing on), so that whichever process runs
   * the task, or serves a request about it, records its spans in the task's trace; null when not traced.
   */
  traceContext: string | null
  /**
   * How the upstream work can be reached again by another process (an upstream task); null when it cannot.
   * Every store clears it in the step that makes the task terminal.
   */
  resume: TaskResume | UnsentCall | null
}

export interface TaskPatch {
  statusMessage?: string | null
  outcome?: TaskOutcome
  /** Sets (or, with null, clears) how the upstream work can be reached again (TaskRecord.resume). */
  resume?: TaskResume | UnsentCall | null
  /** The gateway process making the move: written to the task's timeline only, never to the task. */
  by?: string
  /**
   * The move is made by the process running the task (its owner when it started the run): refused (null, nothing
   * changes) when the task's owner is no longer `asOwner`. A process paused past its lease, whose tasks another
   * process took over, cannot overwrite what the new owner wrote (a fencing check, on every write of a run).
   */
  asOwner?: string
  /**
   * Refuses the move with GW_ERR_STORED_BYTES_LIMIT (and changes nothing) when the outcome it stores would take
   * the task's account past this many stored bytes (limits.storedBytesPerPrincipal); see TaskCreateOptions.
   */
  maxStoredBytes?: number
}

/**
 * One entry of a task's timeline (TaskStore.timeline). The store writes it in the same atomic step as the
 * change it records (create, transition, claim, addInput, settleInput), so the timeline never disagrees with
 * the task. `at` is epoch milliseconds on the caller's clock; `process` is a gateway process id.
 */
export type TaskEvent =
  | { type: 'created', at: number, process: string }
  /**
   * A move that won, to `status`; `statusMessage` only when the move set it; `resultBytes` when it stored an
   * outcome; `upstreamTask` when it recorded the upstream task the call runs as, `replayable` when it recorded
   * that the call's stream can be replayed (TaskPatch.resume).
   */
  | {
    type: 'status',
    at: number,
    status: TaskStatus,
    statusMessage?: string | null,
    process?: string,
    resultBytes?: number,
    upstreamTask?: string,
    replayable?: true,
  }
  | { type: 'input', at: number, key: string, method: string }
  | { type: 'input_settled', at: number, key: string, state: 'answered' | 'expired' }
  /** Another process took the task over from `from` (whose lease lapsed, or after a restart). */
  | { type: 'claimed', at: number, process: string, from: string }

export type InputState = 'pending' | 'answered' | 'expired'

/** A request the upstream sent to the client while a task ran (elicitation, sampling, roots). */
export interface InputRecord {
  /** Gateway-owned, unique for the task's life; also the JSON-RPC id the client sees. */
  key: string
  taskId: string
  principal: string
  method: string
  params: JsonObject
  state: InputState
  createdAt: number
  answer: TaskOutcome | null
  /**
   * The JSON-RPC id the upstream gave the request, when the upstream asked on behalf of its own task: a
   * process that adopts the task sends the client's answer to the upstream under this id.
   */
  upstreamRequestId?: string | number
}

/** A position in a principal's task list (tasks are listed by createdAt, then id). */
export interface TaskCursor {
  createdAt: number
  id: string
}

/** What the operator's task query keeps (the admin API): every given field must match. */
export interface TaskQuery {
  status?: TaskStatus
  upstream?: string
  tool?: string
  principal?: string
}

export interface TaskCreateOptions {
  /**
   * Refuses the task with GW_ERR_TASK_LIMIT when its account already has this many live tasks that
   * are not terminal at `task.createdAt` (tasks.maxActivePerPrincipal). The count and the insert are one
   * atomic step, also between processes sharing the store: of racing creates, exactly this many win.
   */
  maxActive?: number
  /**
   * The key the task's limits count under (maxActive, maxStoredBytes, countActive, storedBytes):
   * `anonymous@<address>` for a caller without auth; default: the task's principal. Kept by the store with the
   * task (every later write of the task counts under it), never part of the record.
   */
  account?: string
  /**
   * Refuses the task with GW_ERR_STORED_BYTES_LIMIT when what it stores would take its account past this many
   * stored bytes (limits.storedBytesPerPrincipal), in the same atomic step as the insert. An account's stored
   * bytes are the UTF-8 bytes of the JSON of what its live tasks hold: each task's request (until the task
   * ends) and client capabilities, its outcome, and the params and answers of its input requests; a task's
   * bytes leave the count when it is swept.
   */
  maxStoredBytes?: number
}

export interface TaskStore {
  /** Stores a new task (status working); see TaskCreateOptions for the per-principal limit. */
  create (task: TaskRecord, options?: TaskCreateOptions): Promise<void>
  /** The task, or null when unknown or past its TTL at `now`. */
  get (id: string, now: number): Promise<TaskRecord | null>
  /** Up to `limit` live tasks of `principal` after `after`, oldest first. */
  list (principal: string, after: TaskCursor | undefined, limit: number, now: number): Promise<TaskRecord[]>
  /**
   * Up to `limit` live tasks of every principal that match `query`, newest first (createdAt, then id, both
   * descending), strictly before `before`: the operator's view (the admin API), never a client's.
   */
  query (query: TaskQuery, before: TaskCursor | undefined, limit: number, now: number): Promise<TaskRecord[]>
  /**
   * Compare-and-set: moves the task to `to` (applying `patch`, setting lastUpdatedAt = now) only if its
   * status is one of `from` and task-state.ts's table has the move (so a terminal task never changes);
   * returns the updated task, or null when the status did not match (or the task is gone). Atomic: of two
   * racing moves from the same status, exactly one wins.
   */
  transition (id: string, from: readonly TaskStatus[], to: TaskStatus, patch: TaskPatch, now: number): Promise<TaskRecord | null>
  /** Live tasks of `account` (TaskCreateOptions.account) that are not terminal, counted up to `atMost` (enough to check a limit). */
  countActive (account: string, now: number, atMost?: number): Promise<number>
  /** The bytes the tasks and sessions of `account` store (see TaskCreateOptions.maxStoredBytes); 0 for an unknown account. */
  storedBytes (account: string): Promise<number>
  /** Every task not yet terminal (for recovery after a restart). */
  unfinished (): Promise<TaskRecord[]>
  /** The live tasks not yet terminal whose owner is `owner`. */
  ownedBy (owner: string, now: number): Promise<TaskRecord[]>
  /**
   * Compare-and-set of the owner: gives a task that is not terminal to `to` only if its owner is `from`;
   * returns the updated task, or null. Of two processes claiming the same task, exactly one wins.
   */
  claim (id: string, from: string, to: string, now: number): Promise<TaskRecord | null>
  /**
   * The owner of the task as the backend holds it now (never a copy kept in memory): null when the task is gone,
   * past its TTL at `now` or terminal. A process checks with it that a task it runs is still its own.
   */
  ownerOf (id: string, now: number): Promise<string | null>
  /** Deletes tasks past their TTL (and their inputs); returns how many. */
  sweep (now: number): Promise<number>

  /**
   * Queues an input request; throws GW_ERR_TASK_INPUT_LIMIT when the task already has `maxPending` pending ones,
   * and GW_ERR_STORED_BYTES_LIMIT when its params would take the task's account past `maxStoredBytes`.
   */
  addInput (input: InputRecord, maxPending: number, maxStoredBytes?: number): Promise<void>
  getInput (key: string): Promise<InputRecord | null>
  /** Pending inputs of a task, oldest first. */
  pendingInputs (taskId: string): Promise<InputRecord[]>
  /** Every input of a task whatever its state (pending, answered, expired), with answers, oldest first. */
  inputsOf (taskId: string): Promise<InputRecord[]>
  /** Compare-and-set from pending to answered or expired (at `now`, epoch ms, default the clock's); false when it was not pending. */
  settleInput (key: string, state: 'answered' | 'expired', answer: TaskOutcome | null, now?: number): Promise<boolean>

  /**
   * The task's timeline, oldest first: at most TIMELINE_LIMIT entries, the newest ones (a task with very many
   * input rounds or status messages loses its oldest entries); [] for an unknown task. Deleted with the task.
   */
  timeline (taskId: string): Promise<TaskEvent[]>
}

export type BusHandler = (message: JsonObject) => void

/**
 * Signals between processes: "something for this session/call happened". Delivery is at most once and
 * only to subscribers alive at publish time; durable data always goes through the record stores.
 */
export interface SignalBus {
  /** Resolves with how many processes received the message (0: nobody was subscribed). */
  publish (channel: string, message: JsonObject): Promise<number>
  /** Returns an unsubscribe function. Handlers must not throw. */
  subscribe (channel: string, handler: BusHandler): () => void
  /**
   * Resolves once every subscription made so far reaches messages published from now on, by any process
   * (a shared bus confirms subscriptions asynchronously). Never rejects: a subscription that failed is taken
   * again when the backend is back.
   */
  subscribed (): Promise<void>
}

/**
 * Liveness of gateway processes. Each process renews its lease while it runs; a process whose lease
 * has lapsed is dead, and another takes over its unfinished tasks.
 */
export interface LeaseStore {
  /** Records that `owner` is alive until `until` (epoch ms). */
  renew (owner: string, until: number): Promise<void>
  /** Whether `owner` holds a lease that runs past `now`. */
  alive (owner: string, now: number): Promise<boolean>
  /** Owners whose lease ended at or before `now` and that were not released. */
  lapsed (now: number): Promise<string[]>
  /** Forgets an owner: it stopped cleanly, or its tasks were taken over. */
  release (owner: string): Promise<void>
}

/**
 * Which gateway process serves each client's upstream sessions (the client's home), so that all of a
 * client's requests reach the one upstream session that serves it, whichever process they land on. An
 * entry lasts `ttlMs` unless its home renews it; a home that died is replaced by compare-and-set.
 */
export interface HomeStore {
  /**
   * Makes `to` the home of `client` when it has none, or when its home is `from` (a process known to be
   * gone) or already `to`; returns the home after the call. Atomic: of two processes claiming, one wins.
   */
  claim (client: string, from: string | null, to: string, ttlMs: number): Promise<string>
  /** Extends the entries of `clients` whose home is `home`; returns those whose home is no longer `home`. */
  renew (home: string, clients: readonly string[], ttlMs: number): Promise<string[]>
  /** Forgets the home of `client` if it is `home`. */
  release (client: string, home: string): Promise<void>
}

/**
 * Token buckets for the rate limits (`limits.*`). A bucket holds at most `burst` tokens and gains `rate`
 * tokens per second; a bucket never used (or forgotten) is full. On a shared store every process takes from
 * the same buckets, on the backend's clock (Redis: the server's TIME, so processes with skewed clocks agree).
 * Idle buckets cost nothing once refilled: the backend forgets them by itself (no sweep needed).
 */
export interface RateLimitStore {
  /**
   * Atomically takes one token from the bucket `key` (at most about 100 characters; the caller hashes long
   * identities): 0 when taken, else the milliseconds until one token will be there (nothing is taken).
   */
  take (key: string, rate: number, burst: number): Promise<number>
}

/**
 * One principal's grant for one upstream, sealed (store/grant-vault.ts): what renews that principal's upstream
 * token for work that no longer has its caller (a task resumed by another process, or after a restart). The
 * store keeps `sealed` as opaque text and never sees what it holds.
 */
export interface GrantRecord {
  principal: string
  upstream: string
  /** Encrypted and authenticated for exactly this principal and upstream; opaque to the store. */
  sealed: string
  /** Epoch ms (the writer's clock) from which the record is gone. */
  expiresAt: number
}

/** Sealed grants, one per (principal, upstream): the latest write wins. */
export interface GrantStore {
  /** Stores `record`, replacing the one of its principal and upstream. */
  put (record: GrantRecord): Promise<void>
  /** The record of `principal` and `upstream`, or null when there is none or it expired at `now`. */
  get (principal: string, upstream: string, now: number): Promise<GrantRecord | null>
  /**
   * Deletes the record of `principal` and `upstream`; with `sealed`, only while it is still that one (a grant
   * refused by the authorization server does not take a newer one another process wrote). Returns whether one went.
   */
  delete (principal: string, upstream: string, sealed?: string): Promise<boolean>
  /** Deletes the records expired at `now`; returns how many. */
  sweep (now: number): Promise<number>
}

export interface StoreHealth {
  ok: boolean
  kind: string
  detail?: string
  /** A fault that does not stop the store from answering but puts stored work at risk (an evicting Redis). */
  warning?: string
}

export interface GatewayStore {
  readonly kind: string
  /** Whether several gateway processes may use the store at once (only then can another process be alive). */
  readonly shared: boolean
  /** Whether the store outlives the process (a later process, or another one, finds what it holds). */
  readonly durable: boolean
  readonly sessions: SessionStore
  readonly tasks: TaskStore
  readonly bus: SignalBus
  readonly leases: LeaseStore
  readonly homes: HomeStore
  readonly rateLimits: RateLimitStore
  readonly grants: GrantStore
  /** Where the store can be emptied under the gateway (Redis): a loss is noticed and told (see data-loss.ts). */
  readonly dataLoss?: DataLossWatch
  /** Liveness of the backend for /readyz. */
  health (): Promise<StoreHealth>
  /** Releases the backend; the store is unusable afterwards. */
  close (): Promise<void>
}
