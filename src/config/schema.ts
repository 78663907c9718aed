import { z } from 'zod'
import { duration, size } from './units.ts'
import { openListenerProblems } from './open-listener.ts'
import { sharedPortProblems } from './listener-ports.ts'
import { originEntryProblem } from './origin-entry.ts'
import { authSchema } from './auth-schema.ts'
import { credentialsProblems, upstreamCredentialsSchema } from './credentials-schema.ts'

/**
 * The one source of truth for the gateway's configuration: validation, defaults, the `Config` type and
 * the published JSON Schema (`config/gateway.schema.json`) all come from here.
 */

const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]*$/

const filterSchema = z.strictObject({
  allow: z.array(z.string().min(1)).prefault(['*'])
    .describe('names to expose, the upstream\'s own (before the prefix); `*` is a wildcard'),
  deny: z.array(z.string().min(1)).prefault([])
    .describe('names to hide, the upstream\'s own (`*` is a wildcard); deny wins over allow'),
}).describe('which entries of this kind the upstream exposes through the gateway')

const defaultFilter = { allow: ['*'], deny: [] }

const taskSupportSchema = z.enum(['optional', 'required', 'forbidden'])

const toolSettingsSchema = z.strictObject({
  timeout: duration('call timeout for this tool; overrides timeouts.call').optional(),
  taskSupport: taskSupportSchema.optional()
    .describe('whether clients may (`optional`), must (`required`) or must not (`forbidden`) call this tool as a task; overrides the upstream\'s taskSupport; default: the upstream\'s taskSupport'),
  idempotent: z.boolean().prefault(false)
    .describe('the tool is safe to run twice: a task of it that was running when the gateway stopped (or whose gateway process was lost) is run again from the start instead of failed'),
  resume: z.enum(['auto', 'off']).optional()
    .describe('overrides the upstream\'s resume for this tool'),
}).describe('settings for one tool, by its upstream name')

const resumeSchema = z.enum(['auto', 'off']).prefault('auto')
  .describe('`auto`: on a Streamable HTTP upstream, running tasks survive the gateway process that runs them where the upstream allows it: a task of a tool the upstream can run as its own task (its taskSupport is `optional` or `required`) runs as one, a call of a task to a 2026-07-28 upstream that offers the tasks extension declares the extension (the upstream decides whether to run it as its own task), and a task of any other tool is resumed when the upstream gives its call stream SSE event ids (it can replay it); another gateway process (or the next one on a SQLite file) then takes the task over instead of failing it; `off`: only tools the upstream requires as tasks run as its tasks, and a task whose gateway process stops is failed (or run again when `idempotent`)')

/** `connect` defaults to 60s for stdio (a package runner may download the server first) and 10s for HTTP. */
function timeoutsSchema (connect: '60s' | '10s') {
  return z.strictObject({
    connect: duration('time to connect (spawn) and finish the MCP handshake; stdio waits longer because a server started through a package runner (`npx -y …`) may be downloaded first. A handshake that takes longer is ended (a stdio process is stopped) and retried after restart.initialDelay; the log and /readyz then say `the MCP handshake did not finish within 60s (timeouts.connect of upstream \'x\')`').prefault(connect),
    request: duration('timeout for list, read, prompt, completion and subscription requests').prefault('60s'),
    call: duration('timeout for one tools/call (no hidden shorter hop)').prefault('1h'),
  }).prefault({})
}

const restartSchema = z.strictObject({
  initialDelay: duration('first delay before reconnecting a failed upstream').prefault('500ms'),
  maxDelay: duration('longest delay between reconnect attempts').prefault('30s'),
}).prefault({})

const upstreamCommon = {
  name: z.string().regex(NAME, 'use letters, digits, - and _ (must start with a letter or digit)')
    .describe('unique name of the upstream, also its default prefix: letters, digits, `-` and `_`, starting with a letter or digit'),
  prefix: z.string().regex(/^[A-Za-z0-9_-]*$/, 'use letters, digits, - and _').optional()
    .describe('prefix of this upstream\'s tool and prompt names, joined with `__`; `\'\'` passes names through unchanged; default: the name'),
  tools: filterSchema.prefault(defaultFilter).describe('which of the upstream\'s tools the gateway exposes'),
  prompts: filterSchema.prefault(defaultFilter).describe('which of the upstream\'s prompts the gateway exposes'),
  resources: filterSchema.prefault(defaultFilter)
    .describe('which of the upstream\'s resources and resource templates the gateway exposes, matched by their name (or URI when they have none)'),
  toolSettings: z.record(z.string(), toolSettingsSchema).prefault({})
    .describe('settings per tool, by the upstream\'s own tool name'),
  resume: resumeSchema,
  instructions: z.boolean().prefault(true)
    .describe('pass the `instructions` this upstream gives in its handshake on to clients (with those of the other upstreams, each under a heading naming it); `false` leaves them out'),
  taskSupport: taskSupportSchema.prefault('optional')
    .describe('whether this upstream\'s tools may (`optional`), must (`required`) or must not (`forbidden`) be called as tasks; `required` breaks clients that cannot do tasks'),
  sessions: z.enum(['per-client', 'shared', 'per-call']).prefault('per-client')
    .describe('how clients share upstream sessions: per-client (one session per client, for servers that keep state), shared (one for all clients with the same capabilities, for stateless servers), per-call (one per call, for stateless stdio servers that ask the client for input from concurrent calls)'),
  maxSessions: z.number().int().min(1).max(100_000).prefault(100)
    .describe('upstream sessions open (or opening) at once, in every sharing mode (for stdio, processes); when all are taken, an idle one is closed to make room (see abandonedTimeout), and a client that needs one more while none is idle gets GW_ERR_UPSTREAM_SESSION_LIMIT'),
  maxSessionsPerPrincipal: z.number().int().min(1).max(100_000).optional()
    .describe('upstream sessions one principal may hold at once (its own idlest makes room for its next one; with all in use it gets GW_ERR_UPSTREAM_SESSION_SHARE); default: a quarter of maxSessions, at least 1, so that no principal can take what the others need; at most maxSessions'),
  abandonedTimeout: duration('an upstream session unused for this long counts as abandoned (its client most likely left without a DELETE): when room is needed, abandoned sessions are closed first, idlest first, before the idlest session of the principal holding the most')
    .prefault('5m'),
  maxConcurrentCalls: z.number().int().min(1).max(10_000).prefault(16)
    .describe('tools/call and prompts/get requests running on this upstream at once, over all its sessions; further calls wait'),
  maxQueuedCalls: z.number().int().min(0).prefault(1000)
    .describe('calls that may wait for a call slot; the next one fails at once with GW_ERR_UPSTREAM_BUSY'),
  maxConcurrentCallsPerPrincipal: z.number().int().min(1).max(10_000).optional()
    .describe('call slots (of maxConcurrentCalls) one principal may hold at once on this upstream, so that one principal cannot take them all; its further calls wait while other principals\' calls run. With auth off, all 2026-07-28 clients are one principal (`anonymous`) and each 2025-era session is its own. Default: maxConcurrentCalls (no share)'),
  slotWaitTimeout: duration('longest wait for a call slot of a call a client waits on (a synchronous tools/call or prompts/get); then it fails with GW_ERR_UPSTREAM_SLOT_TIMEOUT. A task waits as long as it takes, with a `queued: …` statusMessage. A call waiting on its client (an input request not yet answered) holds no slot, and takes one again ahead of new calls once answered, within the same bound')
    .refine((ms) => ms >= 1, 'must be at least 1ms').prefault('30s'),
  idleTimeout: duration('close an upstream session that no request, call, task or subscription has used for this long').prefault('1h'),
  maxResponseBytes: size('largest message the gateway takes from this upstream: an answer (a JSON body, an SSE event, a stdio line) or anything it sends. A larger answer is not read to its end: as soon as the count passes this, its HTTP response is closed (on stdio the rest of the line is skipped), and the request fails with GW_ERR_UPSTREAM_RESPONSE_TOO_LARGE (-32063); the session goes on. The answer of a task\'s call is also held to tasks.maxResultBytes as it arrives over HTTP')
    .refine((bytes) => bytes >= 1024, 'must be at least 1kb').prefault('64mb'),
  timeouts: timeoutsSchema('10s'),
  restart: restartSchema,
}

/** The protocol era spoken to an upstream; one description for both transports that offer the choice. */
function eraSchema (fallback: 'legacy' | 'auto') {
  return z.enum(['legacy', 'auto']).prefault(fallback)
    .describe('protocol era to speak to this upstream: `legacy` (the initialize handshake) or `auto` (probe server/discover first, fall back to legacy); sse upstreams always speak the legacy era')
}

const stdioUpstream = z.strictObject({
  ...upstreamCommon,
  timeouts: timeoutsSchema('60s'),
  transport: z.literal('stdio').describe('spawn `command` and speak over its stdin and stdout'),
  command: z.string().min(1).describe('program to spawn, looked up on the PATH the child gets; a path with a slash is relative to cwd'),
  args: z.array(z.string()).prefault([]).describe('its arguments'),
  env: z.record(z.string(), z.string()).prefault({})
    .describe('environment of the child, added to a minimal one (PATH, HOME, USER, SHELL, TERM, LOGNAME); the gateway\'s own environment is not passed on'),
  cwd: z.string().optional().describe('working directory of the child; default: the gateway\'s working directory'),
  era: eraSchema('legacy'),
})

const httpCommon = {
  ...upstreamCommon,
  url: z.url().describe('endpoint URL of the upstream'),
  headers: z.record(z.string(), z.string()).prefault({})
    // eslint-disable-next-line no-template-curly-in-string
    .describe('headers sent with every request to the upstream, e.g. `Authorization: Bearer ${API_TOKEN}`; write secrets as ${ENV_VAR}'),
  credentials: upstreamCredentialsSchema.optional(),
  connections: z.number().int().min(1).prefault(64).describe('sockets in the upstream HTTP pool; raised to at least maxSessions + 2 × (maxConcurrentCalls + 1), since every upstream session holds one for its SSE stream'),
  keepAliveTimeout: duration('how long a socket of the pool is kept for the next request once idle, when the upstream does not say how long it keeps one (a `Keep-Alive: timeout=N` response header, then honoured less 2 s); keep it below the upstream\'s own idle timeout (5 s for Node.js and uvicorn servers), else a request sent as the upstream closes the socket fails with ECONNRESET')
    .refine((ms) => ms >= 1, 'must be at least 1ms').prefault('4s'),
}

const streamableHttpUpstream = z.strictObject({
  ...httpCommon,
  transport: z.literal('streamable-http').describe('the current MCP HTTP transport'),
  forwardAuthorization: z.boolean().prefault(false)
    .describe('send each caller\'s own Authorization header, instead of the configured one, on what the gateway does for that caller (tools/call, prompts/get, resources/read, completion/complete); never done unless set'),
  era: eraSchema('auto'),
})

const sseUpstream = z.strictObject({
  ...httpCommon,
  transport: z.literal('sse').describe('the older HTTP+SSE transport (protocol 2024-11-05)'),
})

export const upstreamSchema = z.discriminatedUnion('transport', [stdioUpstream, streamableHttpUpstream, sseUpstream])

/** Each transport's upstream schema, and the options every upstream has (to check an upstream whose transport is wrong). */
export const upstreamVariants = { stdio: stdioUpstream, 'streamable-http': streamableHttpUpstream, sse: sseUpstream } as const
export const upstreamCommonSchema = z.looseObject(upstreamCommon)

/** Certificate files of an HTTPS listener, paths relative to the gateway's working directory. */
export const tlsSchema = z.strictObject({
  cert: z.string().min(1).describe('PEM file of the server certificate, followed by its intermediate CA certificates'),
  key: z.string().min(1).describe('PEM file of the certificate\'s private key (not encrypted)'),
  ca: z.string().min(1).optional()
    .describe('PEM file of intermediate CA certificates sent with the certificate, when cert holds only the server\'s own'),
})

const serverSchema = z.strictObject({
  host: z.string().min(1).prefault('127.0.0.1').describe('address to listen on; `0.0.0.0` listens on every interface'),
  allowUnauthenticated: z.boolean().prefault(false)
    .describe('serve clients without auth (no auth.tokens, no auth.oauth) on a host other than loopback (127.0.0.0/8, ::1, localhost), where anyone who reaches the port may use every upstream and a session id is the only credential; without it such a configuration is refused at start. Set it only behind a proxy that authenticates, or for a demo'),
  port: z.number().int().min(0).max(65_535).prefault(8080).describe('port to listen on; `0` picks a free port'),
  path: z.string().regex(/^\/[^\s?#]*$/, 'must start with / and hold no query').prefault('/mcp')
    .describe('path of the MCP endpoint'),
  dnsRebindingProtection: z.boolean().prefault(true)
    .describe('check the Host and Origin headers of requests to the MCP path against allowedHosts and allowedOrigins (protection against DNS rebinding); turn it off only behind a proxy that checks the Host itself'),
  allowedHosts: z.array(z.string().min(1)).prefault([])
    .describe('Host header values accepted besides `localhost`, `127.0.0.1` and `[::1]`: a hostname (any port) or `hostname:port`'),
  allowedOrigins: z.array(z.string().min(1).superRefine((entry, ctx) => {
    const problem = originEntryProblem(entry)
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem })
  })).prefault([])
    .describe('Origin values accepted (scheme://host[:port], each written in full as browsers send it; `null` and wildcards are refused); origins on localhost names are always accepted; listed origins, and only these, also get CORS (browser clients)'),
  maxBodyBytes: size('largest request body; larger ones get HTTP 413').prefault('4mb'),
  pageSize: z.number().int().min(1).max(10_000).prefault(100)
    .describe('entries per page of tools/list, prompts/list, resources/list, resources/templates/list and tasks/list'),
  sessionIdleTimeout: duration('delete a session unused for this long (its use is recorded at most every 10 s, and at least four times per timeout)').prefault('1h'),
  sseKeepAlive: duration('interval of SSE keep-alive comments').prefault('15s'),
  shutdownGrace: duration('on SIGTERM or SIGINT, time in-flight calls and running tasks get to finish before they are cancelled').prefault('10s'),
  reloadGrace: duration('time calls and tasks running on an upstream that a configuration reload removes or replaces get to finish before they are cancelled (and fail) and the old upstream is closed').prefault('5m'),
  inputHoldTimeout: duration('how long a 2026-07-28 synchronous call waiting for input (input_required) is held for the client\'s retry').prefault('10m'),
  stateSecret: z.string().min(16, 'use at least 16 characters').optional()
    .describe('key that signs requestState values and, through a key derived from it, every message between gateway processes; required with the redis and postgres stores; give every gateway process the same one (from the environment); default: random per process'),
  listCacheTtl: duration('caching hint (`ttlMs`): how long 2026-07-28 clients may cache server/discover and list results').prefault('60s'),
  trustProxy: z.union([z.boolean(), z.number().int().min(1), z.array(z.string().min(1))]).prefault(false)
    .describe('where the client address (per-address rate limit, logs) comes from: `false` the socket; `true` the first X-Forwarded-For entry; a number: that many proxy hops are trusted; a list: proxies with these addresses or CIDR ranges are trusted'),
  tls: tlsSchema.optional()
    .describe('serve HTTPS instead of HTTP with this certificate; the files are read at start; default: plain HTTP'),
  instructions: z.union([z.string().min(1), z.literal(false)]).optional()
    .describe('the `instructions` clients get in the initialize (and server/discover) result: a text replaces those of the upstreams; `false` sends none; default: the upstreams\' own (one upstream: its text unchanged; several: each one\'s under a heading naming it, see upstreams.md)'),
}).describe('the MCP listener that clients connect to')

const loggingSchema = z.strictObject({
  level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).prefault('info')
    .describe('lowest level that is logged; `silent` logs nothing'),
  redactHeaders: z.array(z.string().min(1)).prefault([])
    .describe('extra header names whose values are replaced by `[redacted]` in logs (authorization, proxy-authorization, cookie, set-cookie and x-api-key always are)'),
  format: z.enum(['json', 'pretty']).prefault('json')
    .describe('`json`: one JSON object a line, for log collectors; `pretty`: one readable line per entry (time, level, message, fields), for a human at a terminal'),
  probes: z.boolean().prefault(false)
    .describe('write access lines for /healthz, /readyz and the metrics path too; off: probes and scrapes, which come every few seconds, leave no line'),
}).describe('log lines on stdout (pino): JSON, or readable lines with `format: pretty`')

const tasksSchema = z.strictObject({
  defaultTtl: duration('retention of a task when the client asks for none, counted from its creation').prefault('1h'),
  maxTtl: duration('longest retention a client may ask for with `task.ttl`; longer requests are cut to this').prefault('24h'),
  pollInterval: duration('poll interval suggested to clients (the Task\'s `pollInterval`)').prefault('1s'),
  pollIntervalMax: duration('longest poll interval suggested to clients: a running task\'s suggested interval is tasks.pollInterval while it is young, then a tenth of its age (whole seconds) up to this, so that long tasks are polled less often; at or below tasks.pollInterval, the interval stays fixed').prefault('30s'),
  maxActivePerPrincipal: z.number().int().min(1).prefault(100)
    .describe('tasks one principal may have in `working` or `input_required` at once; the next one fails with GW_ERR_TASK_LIMIT'),
  maxQueuedInputs: z.number().int().min(1).prefault(10)
    .describe('unanswered input requests (elicitation, sampling, roots) one task may hold; the upstream\'s next one fails with GW_ERR_TASK_INPUT_LIMIT'),
  maxResultBytes: size('largest outcome (the upstream\'s result or error, as JSON) one task stores; a larger one fails the task with GW_ERR_TASK_RESULT_TOO_LARGE (-32060)').prefault('4mb'),
  sweepInterval: duration('how often tasks past their TTL are deleted from the store').prefault('30s'),
  ownerLease: duration('several processes on one Redis: a process that has not renewed its lease for this long is lost, and another process fails its running tasks or runs idempotent ones again; at least 1s')
    .refine((ms) => ms >= 1000, 'must be at least 1s').prefault('10s'),
  decide: z.union([
    z.literal('always'),
    z.strictObject({
      after: duration('how long a call may take and still be answered synchronously; a call still running then becomes a task'),
      input: z.enum(['task', 'round']).prefault('task')
        .describe('what becomes of a call of an `optional` tool that asks for input within `after`: `task`: it becomes a task at once, and the input is the task\'s (`tasks/get`, `tasks/update`); `round`: the input comes back as `input_required` first (MRTR) and each retry gets the window again. A tool that runs only as a task always gets its input rounds first'),
    }),
  ]).prefault({ after: '500ms' })
    .describe('for 2026-07-28 clients that declare the tasks extension: `always` returns a task for every task-eligible call; `{ after: <duration> }` answers synchronously when the call ends within that time without asking for input, and returns a task otherwise (see `input`). A tool that runs only as a task (its taskSupport, the gateway\'s or the upstream\'s own, is `required`) is never answered synchronously: input it asks for within the window comes back as `input_required` first, and the round in which it no longer asks becomes the task'),
}).describe('tasks: retention, limits, and when a 2026-07-28 call becomes one')

const bucketSchema = z.strictObject({
  rate: z.number().positive().describe('tokens added per second: the sustained rate allowed'),
  burst: z.number().int().min(1).describe('bucket size: how many requests may come at once after a quiet spell'),
})

const limitsSchema = z.strictObject({
  requestsPerIp: bucketSchema.optional()
    .describe('token bucket for requests to the MCP path per client address, checked before authentication; an empty bucket answers HTTP 429 with Retry-After (GW_ERR_RATE_LIMITED); default: off'),
  requestsPerPrincipal: bucketSchema.optional()
    .describe('the same per authenticated principal; default: off'),
  taskOpsPerPrincipal: bucketSchema.optional()
    .describe('the same for tasks/* requests and task-augmented tools/call (2025-11-25) per principal (per client address when auth is off); a 2026-07-28 tools/call is counted by requestsPerPrincipal only, since the gateway decides later whether it becomes a task; default: off'),
  pollBurst: z.number().int().min(1).optional()
    .describe('polls of one task allowed ahead of tasks.pollInterval; a faster tasks/get of that task gets 429 with Retry-After (GW_ERR_POLL_TOO_FAST); default: off'),
  sessionsPerPrincipal: z.number().int().min(1).prefault(256)
    .describe('sessions one principal may hold at once (with auth off: one client address, `server.trustProxy` applied); the next initialize gets 429 (GW_ERR_SESSION_LIMIT)'),
  streamsPerSession: z.number().int().min(1).prefault(100)
    .describe('SSE streams one session holds open at once on one gateway process (GET streams, tasks/result waits, 2026-07-28 listens per principal; with auth off all 2026-07-28 clients share one count); the next gets 429 (GW_ERR_STREAM_LIMIT). Responses that switch to SSE only to carry progress or input requests are not counted: they last as long as their request'),
  streamStallTimeout: duration('close an SSE stream whose client has not read what is waiting for this long').prefault('60s'),
  streamBufferBytes: size('close an SSE stream, instead of writing to it, when this much already waits unread by its client (one larger message still goes out)').prefault('16mb'),
  headersTimeout: duration('time a client has to send a request\'s headers (on a new connection, counted from its opening: a connection that sends nothing is closed too); then the connection is closed').prefault('10s'),
  requestTimeout: duration('time a client has to send a whole request, body included (responses, SSE streams included, are not bounded by it)').prefault('30s'),
  maxConnections: z.number().int().min(1).prefault(10_000)
    .describe('TCP connections the gateway accepts at once; further ones are closed at once'),
  connectionsPerIp: z.number().int().min(1).prefault(1000)
    .describe('TCP connections one client address (the socket\'s, whatever server.trustProxy says) may hold open at once; further ones from it are closed at once. Behind a reverse proxy or a NAT that many clients share, every connection comes from its address: raise it towards maxConnections'),
  keepAliveTimeout: duration('close a connection that has answered its requests and sent nothing new for this long (HTTP keep-alive); keep it above the idle timeout of a load balancer in front, so that the balancer closes first').prefault('72s'),
  storedBytesPerPrincipal: size('bytes one principal\'s tasks may hold in the store at once (per client address when auth is off): the JSON of each running task\'s arguments, of every task\'s client capabilities and outcome, and of its input requests and their answers, until the task is swept after its TTL, and the client capabilities and client info of each session until it ends. A tools/call that would pass it gets GW_ERR_STORED_BYTES_LIMIT (-32070) and no task, and so does an initialize (no session); an outcome that does not fit fails its task with that error instead of being stored; an input request that does not fit is refused to the upstream').prefault('64mb'),
  clientInfoBytes: size('largest `capabilities` and largest `clientInfo` (each as JSON) an `initialize` may send; the session stores both for its life, so a larger one is refused with GW_ERR_CLIENT_INFO_TOO_LARGE (-32602) and no session is created').prefault('64kb'),
}).describe('rate limits, and bounds on sessions, streams, connections and stored bytes')

/** The `sslmode` values of a PostgreSQL url the store knows (see the url's description). */
const POSTGRES_SSLMODES = ['disable', 'require', 'verify-full']

const storeSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('memory').describe('kept in the process, lost on exit') }),
  z.strictObject({
    kind: z.literal('sqlite').describe('one file that survives restarts (one gateway process per file)'),
    path: z.string().min(1).prefault('./data/gateway.db')
      .describe('the SQLite file, relative to the working directory; created with its directory on first start'),
    lockStaleAfter: duration('the process holding the file records a heartbeat in it every sixth of this (and checks then that its path still names the open file); one whose heartbeat is older than this (paused, a frozen VM, on another host) is gone, and a process started on the file takes it over; at least 1s')
      .refine((ms) => ms >= 1000, 'must be at least 1s').prefault('30s'),
    busyWait: duration('longest a store operation waits, in all, for the write lock another process holds on the file (a sqlite3 shell in a transaction, a backup tool), retrying off the event loop, before it is refused with GW_ERR_STORE_UNAVAILABLE naming the lock').prefault('5s'),
  }),
  z.strictObject({
    kind: z.literal('redis').describe('a Redis server that several gateway processes share'),
    url: z.string().regex(/^rediss?:\/\//, 'must start with redis:// (or rediss:// for TLS)').prefault('redis://127.0.0.1:6379')
      .describe('Redis URL: redis://[user:password@]host:port[/db]; rediss:// for TLS; take the password from the environment'),
    prefix: z.string().min(1).prefault('mcp-task-gateway:')
      .describe('prefix of every key the gateway writes; processes that share tasks must use the same one'),
    password: z.string().min(1).optional()
      .describe('password (Redis AUTH) when the url carries none; take it from the environment, never write it inline'),
    caFile: z.string().min(1).optional()
      .describe('PEM file of the certificate authority that signed the Redis server certificate (rediss:// with a private CA)'),
    messageMaxAge: duration('age bound of a signed message between gateway processes: one whose time is further than this from the receiver\'s clock (either way: it allows for clock skew between machines) is refused as stale; its nonce is remembered twice as long to refuse replays; at least 1s')
      .refine((ms) => ms >= 1000, 'must be at least 1s').prefault('30s'),
  }).refine((store) => store.caFile === undefined || store.url.startsWith('rediss://'), {
    message: 'caFile needs a rediss:// url (TLS)',
    path: ['caFile'],
  }),
  z.strictObject({
    kind: z.literal('postgres').describe('a PostgreSQL database that several gateway processes share'),
    url: z.string().regex(/^postgres(ql)?:\/\//, 'must start with postgres:// (or postgresql://)').prefault('postgres://127.0.0.1:5432/postgres')
      .refine((url) => POSTGRES_SSLMODES.includes(new URL(url).searchParams.get('sslmode') ?? 'disable'), 'sslmode must be disable, require or verify-full')
      .describe('PostgreSQL URL: postgres://[user[:password]@]host[:port]/database[?sslmode=verify-full]; `sslmode=require` or `verify-full` turns TLS on, and both verify the server certificate and name (against the system CAs, or caFile); take the password from the environment'),
    schema: z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/, 'use lower-case letters, digits and _ (a plain SQL identifier, at most 63 characters)').prefault('mcp_task_gateway')
      .describe('schema of the gateway\'s tables, created (with the tables) and migrated at start; processes that share tasks must use the same one'),
    password: z.string().min(1).optional()
      .describe('password when the url carries none; take it from the environment or a secret file, never write it inline'),
    caFile: z.string().min(1).optional()
      .describe('PEM file of the certificate authority that signed the PostgreSQL server certificate (TLS with a private CA; needs sslmode in the url)'),
    poolSize: z.number().int().min(1).max(1000).prefault(10)
      .describe('connections each gateway process keeps to PostgreSQL at most; every process adds this many to the server\'s max_connections budget'),
    acquireTimeout: duration('longest a store operation waits for a free connection of the pool; then it is refused with GW_ERR_STORE_UNAVAILABLE saying the pool is exhausted (the client gets 503 with Retry-After), never queued without bound')
      .refine((ms) => ms >= 1, 'must be at least 1ms').prefault('5s'),
    messageMaxAge: duration('age bound of a signed message between gateway processes: one whose time is further than this from the receiver\'s clock (either way: it allows for clock skew between machines) is refused as stale; its nonce is remembered twice as long to refuse replays; at least 1s')
      .refine((ms) => ms >= 1000, 'must be at least 1s').prefault('30s'),
  }).refine((store) => store.caFile === undefined || new URL(store.url).searchParams.has('sslmode'), {
    message: 'caFile needs TLS: add ?sslmode=verify-full to the url',
    path: ['caFile'],
  }),
]).describe('where sessions, tasks, their results and their input requests are kept')

const adminSchema = z.strictObject({
  host: z.string().min(1).prefault('127.0.0.1')
    .describe('address of the admin API listener; keep it on loopback or a private network'),
  port: z.number().int().min(0).max(65_535)
    .describe('port of the admin API listener, not the MCP port; 0 picks a free port'),
  tokenSha256: z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be the hex SHA-256 of the admin token (64 hex digits), never the token itself')
    // eslint-disable-next-line no-template-curly-in-string
    .describe('hex SHA-256 of the bearer token every admin request must carry (64 hex digits), never the token itself; made like auth.tokens[].sha256, best from the environment (`tokenSha256: ${ADMIN_TOKEN_SHA256}`)'),
  readTokenSha256: z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be the hex SHA-256 of the read-only token (64 hex digits), never the token itself').optional()
    .describe('hex SHA-256 of a read-only bearer token: it opens the metrics path (on this listener) and the admin API\'s GET routes (upstreams, tasks, events, the dashboard\'s data) but no cancel, drain or reload (403 GW_ERR_ADMIN_READ_ONLY); for a Prometheus scraper or a monitoring view; default: none'),
  dashboard: z.boolean().prefault(true)
    .describe('serve the live dashboard at /admin/dashboard; its page and script hold no data and load without the token, which the page asks for'),
  tls: tlsSchema.optional()
    .describe('serve the admin API over HTTPS with these certificate files (cert, key, ca as in server.tls); default: plain HTTP'),
}).describe('the admin API (upstreams, every principal\'s tasks, cancel, drain, reload, the live dashboard) on its own listener; off unless configured')
const metricsSchema = z.strictObject({
  enabled: z.boolean().prefault(true).describe('collect Prometheus metrics and serve them at metrics.path; `false` records nothing'),
  listener: z.enum(['admin', 'main']).prefault('admin')
    .describe('where the path is served: `admin`, on the admin listener (it must be configured: without it nothing is collected), or `main`, on the MCP listener next to /healthz, reachable by everyone who reaches the gateway'),
  path: z.string().regex(/^\/[\w.~/-]*$/, 'must be a URL path starting with /').prefault('/metrics')
    .describe('path of the Prometheus text exposition; with listener main it must differ from server.path, /healthz and /readyz (checked at start)'),
}).prefault({})

const tracingSchema = z.strictObject({
  enabled: z.boolean().prefault(false).describe('record OpenTelemetry traces and export them over OTLP/HTTP to tracing.endpoint'),
  endpoint: z.url().prefault('http://127.0.0.1:4318/v1/traces')
    .describe('OTLP/HTTP traces endpoint of the collector (the full URL, usually ending in /v1/traces); spans are sent as JSON'),
  headers: z.record(z.string(), z.string()).prefault({})
    // eslint-disable-next-line no-template-curly-in-string
    .describe('headers sent with every export (a collector\'s API key, say); write secrets as ${ENV_VAR}'),
  serviceName: z.string().min(1).prefault('mcp-task-gateway').describe('service.name of the exported spans'),
  sampleRatio: z.number().min(0).max(1).prefault(1)
    .describe('share of new traces recorded (0 to 1); a request that carries a trace context follows its sampled flag instead'),
  exportTimeout: duration('time one export request may take before it is given up').prefault('10s'),
  batchDelay: duration('longest time a finished span waits before it is exported').prefault('5s'),
  maxBatchSize: z.number().int().min(1).max(100_000).prefault(512).describe('spans sent in one export request at most'),
  maxQueueSize: z.number().int().min(1).max(1_000_000).prefault(2048)
    .describe('finished spans waiting for export at most; beyond this new spans are dropped (the collector is down or slow)'),
}).refine((tracing) => tracing.maxBatchSize <= tracing.maxQueueSize, {
  message: 'must not be larger than maxQueueSize',
  path: ['maxBatchSize'],
}).prefault({})

export const configSchema = z.strictObject({
  server: serverSchema.prefault({}),
  logging: loggingSchema.prefault({}),
  store: storeSchema.prefault({ kind: 'sqlite', path: './data/gateway.db' }),
  tasks: tasksSchema.prefault({}),
  auth: authSchema.prefault({}),
  limits: limitsSchema.prefault({}),
  admin: adminSchema.optional(),
  metrics: metricsSchema,
  tracing: tracingSchema,
  upstreams: z.array(upstreamSchema).min(1, 'list at least one upstream'),
}).refine((config) => config.auth.permissions.length === 0 || config.auth.tokens.length > 0 || config.auth.oauth !== undefined, {
  message: 'permissions need callers with scopes: configure auth.tokens or auth.oauth',
  path: ['auth', 'permissions'],
}).refine((config) => config.metrics.listener !== 'main' || ![config.server.path, '/healthz', '/readyz'].includes(config.metrics.path), {
  message: 'is already served on the main listener (server.path, /healthz or /readyz): choose another path',
  path: ['metrics', 'path'],
}).refine((config) => (config.store.kind !== 'redis' && config.store.kind !== 'postgres') || config.server.stateSecret !== undefined, {
  message: 'is required with the redis and postgres stores: every gateway process signs its messages to the others with a key derived from it, and refuses those it cannot verify; give every process the same secret (from the environment)',
  path: ['server', 'stateSecret'],
}).superRefine((config, ctx) => {
  for (const problem of openListenerProblems(config)) ctx.addIssue({ code: 'custom', message: problem.message, path: ['server', 'host'] })
  for (const problem of sharedPortProblems(config)) ctx.addIssue({ code: 'custom', message: problem.message, path: ['admin', 'port'] })
  for (const problem of credentialsProblems(config)) ctx.addIssue({ code: 'custom', ...problem })
})

export type Config = z.output<typeof configSchema>
export type ConfigInput = z.input<typeof configSchema>
export type UpstreamConfig = Config['upstreams'][number]
export type StdioUpstreamConfig = Extract<UpstreamConfig, { transport: 'stdio' }>
export type HttpUpstreamConfig = Exclude<UpstreamConfig, StdioUpstreamConfig>
export type ServerConfig = Config['server']
export type TlsConfig = z.output<typeof tlsSchema>
export type StoreConfig = Config['store']
export type TasksConfig = Config['tasks']
export type LimitsConfig = Config['limits']
export type AuthConfig = Config['auth']
export type AdminConfig = NonNullable<Config['admin']>
export type MetricsConfig = Config['metrics']
export type TracingConfig = Config['tracing']
export type TaskSupport = z.output<typeof taskSupportSchema>

export function upstreamPrefix (upstream: UpstreamConfig): string {
  return upstream.prefix ?? upstream.name
}
