import { z } from 'zod'
import { duration, size } from './units.ts'

/**
 * The one source of truth for the gateway's configuration: validation, defaults, the `Config` type and
 * the published JSON Schema (`config/gateway.schema.json`) all come from here.
 */

const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]*$/

const filterSchema = z.strictObject({
  allow: z.array(z.string().min(1)).prefault(['*'])
    .describe('names (or globs with *) to expose; names are the upstream\'s own, before the prefix'),
  deny: z.array(z.string().min(1)).prefault([])
    .describe('names (or globs with *) to hide; deny wins over allow'),
}).describe('which entries of this kind the upstream exposes through the gateway')

const defaultFilter = { allow: ['*'], deny: [] }

const taskSupportSchema = z.enum(['optional', 'required', 'forbidden'])

const toolSettingsSchema = z.strictObject({
  timeout: duration('call timeout for this tool; overrides timeouts.call').optional(),
  taskSupport: taskSupportSchema.optional()
    .describe('whether clients may (optional), must (required) or must not (forbidden) call this tool as a task; overrides the upstream\'s taskSupport'),
  idempotent: z.boolean().prefault(false)
    .describe('safe to run again: a task of this tool interrupted by a gateway restart is run again instead of failed'),
}).describe('settings for one tool, by its upstream name')

/** `connect` defaults to 60s for stdio (a package runner may download the server first) and 10s for HTTP. */
function timeoutsSchema (connect: '60s' | '10s') {
  return z.strictObject({
    connect: duration('time to connect (or spawn) and finish the MCP handshake').prefault(connect),
    request: duration('timeout for list, read, prompt and completion requests').prefault('60s'),
    call: duration('timeout for one tools/call (no hidden shorter hop)').prefault('1h'),
  }).prefault({})
}

const restartSchema = z.strictObject({
  initialDelay: duration('first delay before reconnecting a failed upstream').prefault('500ms'),
  maxDelay: duration('longest delay between reconnect attempts').prefault('30s'),
}).prefault({})

const upstreamCommon = {
  name: z.string().regex(NAME, 'use letters, digits, - and _ (must start with a letter or digit)')
    .describe('unique name of the upstream; also the default prefix'),
  prefix: z.string().regex(/^[A-Za-z0-9_-]*$/, 'use letters, digits, - and _').optional()
    .describe('prefix for this upstream\'s names, joined with "__"; default: the name; "" passes names through unchanged'),
  tools: filterSchema.prefault(defaultFilter),
  prompts: filterSchema.prefault(defaultFilter),
  resources: filterSchema.prefault(defaultFilter),
  toolSettings: z.record(z.string(), toolSettingsSchema).prefault({}),
  taskSupport: taskSupportSchema.prefault('optional')
    .describe('task support advertised for this upstream\'s tools; required breaks clients that cannot do tasks'),
  sessions: z.enum(['per-client', 'shared', 'per-call']).prefault('per-client')
    .describe('how clients share upstream sessions: per-client (one session per client, for servers that keep state), shared (one for all clients with the same capabilities, for stateless servers), per-call (one per call, for stateless stdio servers that ask the client for input from concurrent calls)'),
  maxSessions: z.number().int().min(1).max(100_000).prefault(100)
    .describe('upstream sessions (per-client or shared) open at once; a client that needs one more gets GW_ERR_UPSTREAM_SESSION_LIMIT'),
  maxConcurrentCalls: z.number().int().min(1).max(10_000).prefault(16)
    .describe('tools/call and prompts/get requests running on this upstream at once, over all its sessions; further calls wait'),
  maxQueuedCalls: z.number().int().min(0).prefault(1000)
    .describe('calls that may wait for a call slot; beyond this a call fails at once'),
  idleTimeout: duration('close an upstream session that no request, call, task or subscription has used for this long').prefault('1h'),
  timeouts: timeoutsSchema('10s'),
  restart: restartSchema,
}

const stdioUpstream = z.strictObject({
  ...upstreamCommon,
  timeouts: timeoutsSchema('60s'),
  transport: z.literal('stdio'),
  command: z.string().min(1).describe('program to spawn'),
  args: z.array(z.string()).prefault([]),
  env: z.record(z.string(), z.string()).prefault({})
    .describe('environment of the child, added to a minimal safe environment (PATH, HOME, …)'),
  cwd: z.string().optional(),
  era: z.enum(['legacy', 'auto']).prefault('legacy')
    .describe('protocol era to speak to this upstream; auto probes server/discover first'),
})

const httpCommon = {
  ...upstreamCommon,
  url: z.url().describe('endpoint URL of the upstream'),
  headers: z.record(z.string(), z.string()).prefault({})
    // eslint-disable-next-line no-template-curly-in-string
    .describe('headers sent on every upstream request; write secrets as ${ENV_VAR}'),
  connections: z.number().int().min(1).prefault(64).describe('sockets in the upstream HTTP pool; raised to at least maxSessions + 2 × (maxConcurrentCalls + 1), since every upstream session holds one for its SSE stream'),
}

const streamableHttpUpstream = z.strictObject({
  ...httpCommon,
  transport: z.literal('streamable-http'),
  forwardAuthorization: z.boolean().prefault(false)
    .describe('send the caller\'s own Authorization header on the requests made for it (tools/call, prompts/get, resources/read, completion/complete) instead of the configured one; never done unless set'),
  era: z.enum(['legacy', 'auto']).prefault('auto')
    .describe('protocol era to speak to this upstream; auto probes server/discover first'),
})

const sseUpstream = z.strictObject({
  ...httpCommon,
  transport: z.literal('sse'),
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
  host: z.string().min(1).prefault('127.0.0.1').describe('address to listen on'),
  port: z.number().int().min(0).max(65_535).prefault(8080),
  path: z.string().regex(/^\/[^\s?#]*$/, 'must start with / and hold no query').prefault('/mcp')
    .describe('path of the MCP endpoint'),
  dnsRebindingProtection: z.boolean().prefault(true)
    .describe('check Host and Origin headers against the lists below'),
  allowedHosts: z.array(z.string().min(1)).prefault([])
    .describe('Host header values (hostname, or hostname:port) accepted; localhost names are always accepted'),
  allowedOrigins: z.array(z.string().min(1)).prefault([])
    .describe('Origin values accepted (scheme://host[:port]); origins on localhost names are always accepted; listed origins, and only these, also get CORS (browser clients)'),
  maxBodyBytes: size('largest accepted request body').prefault('4mb'),
  pageSize: z.number().int().min(1).max(10_000).prefault(100)
    .describe('entries per page of tools/list, prompts/list, resources/list, resources/templates/list and tasks/list'),
  sessionIdleTimeout: duration('delete a session unused for this long').prefault('1h'),
  sseKeepAlive: duration('interval of SSE keep-alive comments').prefault('15s'),
  shutdownGrace: duration('time in-flight calls get to finish on SIGTERM before they are cancelled').prefault('10s'),
  inputHoldTimeout: duration('how long a 2026-07-28 synchronous call waiting for input (input_required) is held for the client\'s retry').prefault('10m'),
  stateSecret: z.string().min(16, 'use at least 16 characters').optional()
    .describe('key that signs requestState values; give every gateway process the same one (from the environment); default: random per process'),
  listCacheTtl: duration('how long 2026-07-28 clients may cache discover and list results').prefault('60s'),
  trustProxy: z.union([z.boolean(), z.number().int().min(1), z.array(z.string().min(1))]).prefault(false)
    .describe('take the client address from X-Forwarded-For: true trusts every proxy, a number that many hops, a list those addresses or CIDR ranges; default false (the socket address)'),
  tls: tlsSchema.optional()
    .describe('serve HTTPS instead of HTTP with this certificate; the files are read at start; default: plain HTTP'),
})

const loggingSchema = z.strictObject({
  level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).prefault('info'),
  redactHeaders: z.array(z.string().min(1)).prefault([])
    .describe('extra header names whose values never appear in logs (authorization, proxy-authorization, cookie, set-cookie and x-api-key never do)'),
})

const tasksSchema = z.strictObject({
  defaultTtl: duration('retention of a task when the client asks for none, counted from its creation').prefault('1h'),
  maxTtl: duration('longest retention a client may ask for; longer requests are clamped').prefault('24h'),
  pollInterval: duration('poll interval suggested to clients').prefault('1s'),
  maxActivePerPrincipal: z.number().int().min(1).prefault(100)
    .describe('tasks one principal may have running (working or input_required) at once'),
  maxQueuedInputs: z.number().int().min(1).prefault(10)
    .describe('unanswered input requests (elicitation, sampling, roots) one task may hold'),
  maxResultBytes: size('largest outcome (result or error, as JSON) a task stores; a larger one fails the task with GW_ERR_TASK_RESULT_TOO_LARGE').prefault('4mb'),
  sweepInterval: duration('how often expired tasks are deleted').prefault('30s'),
  ownerLease: duration('a process that has not renewed its lease for this long is lost; another process fails or re-runs its tasks (redis store)')
    .refine((ms) => ms >= 1000, 'must be at least 1s').prefault('10s'),
  decide: z.union([
    z.literal('always'),
    z.strictObject({ after: duration('answer synchronously when the call ends within this time, else return the task') }),
  ]).prefault({ after: '500ms' })
    .describe('for 2026-07-28 clients that declare the tasks extension: always return a task, or only when the call outlasts `after`'),
})

/** The asymmetric JWS algorithms an access token may be signed with (the gateway holds public keys only). */
const JWT_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const

const authSchema = z.strictObject({
  tokens: z.array(z.strictObject({
    principal: z.string().min(1)
      .refine((name) => !name.startsWith('oauth:') && name !== 'anonymous' && !name.startsWith('anonymous:'), 'oauth:… names OAuth subjects and anonymous… callers without auth: choose another name')
      .describe('name the token authenticates as; tasks and sessions are bound to it'),
    sha256: z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be the hex SHA-256 of the token (64 hex digits), never the token itself')
      .describe('hex SHA-256 of the bearer token'),
    scopes: z.array(z.string().min(1)).prefault([])
      .describe('scopes the token carries, matched against auth.permissions'),
  })).prefault([])
    .describe('static bearer tokens; with no tokens and no oauth, auth is off and each session is its own principal'),
  permissions: z.array(z.strictObject({
    scope: z.string().min(1).describe('a scope of the caller\'s token (static token scopes, or the JWT `scope`/`scp` claim)'),
    upstreams: z.array(z.string().min(1)).prefault([])
      .describe('upstream names (globs with *) whose tools, prompts and resources the scope grants'),
    tools: z.array(z.string().min(1)).prefault([])
      .describe('tool names as clients see them, prefix included (globs with *), that the scope grants'),
  }).refine((rule) => rule.upstreams.length + rule.tools.length > 0, 'grant at least one upstream or tool'))
    .prefault([])
    .describe('what each scope grants; empty: every caller may use every upstream and tool. Entries a caller may not use are neither listed nor callable'),
  oauth: z.strictObject({
    issuer: z.string().url().describe('the authorization server: the `iss` every access token must carry'),
    jwksUri: z.string().url().describe('where the authorization server publishes its signing keys (JWKS); cached, refetched for an unknown key id'),
    resource: z.string().url().describe('this MCP endpoint\'s public URL (https://…/mcp): the protected resource named in its metadata'),
    audience: z.array(z.string().min(1)).min(1).optional()
      .describe('accepted `aud` values; default: `resource`'),
    principalClaim: z.string().min(1).prefault('sub').describe('the token claim that names the principal'),
    scopesSupported: z.array(z.string().min(1)).prefault([]).describe('scopes advertised in the protected resource metadata'),
    requiredScopes: z.array(z.string().min(1)).prefault([]).describe('scopes every token must carry (403 insufficient_scope otherwise)'),
    clockTolerance: duration('accepted clock difference for `exp` and `nbf`').prefault('30s'),
    jwksCooldown: duration('least time between two fetches of the JWKS, failed ones included (a token with an unknown key id triggers one)').prefault('30s'),
    algorithms: z.array(z.enum(JWT_ALGORITHMS)).min(1).prefault([...JWT_ALGORITHMS])
      .describe('signature algorithms (`alg`) accepted; any other, `none` and HS* included, gets 401 invalid_token'),
    requireTyp: z.boolean().prefault(false)
      .describe('require the RFC 9068 header `typ: at+jwt` (set it when the issuer types its access tokens so); off: no `typ`, `JWT` or `at+jwt`'),
  }).optional().describe('OAuth 2.1 resource server: JWT access tokens verified against the issuer\'s keys'),
})

const bucketSchema = z.strictObject({
  rate: z.number().positive().describe('tokens added per second: the sustained rate allowed'),
  burst: z.number().int().min(1).describe('bucket size: how many requests may come at once after a quiet spell'),
})

const limitsSchema = z.strictObject({
  requestsPerIp: bucketSchema.optional()
    .describe('token bucket for HTTP requests to the MCP path per client address, checked before authentication (429 when empty); default: off'),
  requestsPerPrincipal: bucketSchema.optional()
    .describe('token bucket for MCP requests per authenticated principal (429 when empty); default: off'),
  taskOpsPerPrincipal: bucketSchema.optional()
    .describe('token bucket for task creation and tasks/* requests per principal (429 when empty); default: off'),
  pollBurst: z.number().int().min(1).optional()
    .describe('polls of one task allowed ahead of tasks.pollInterval; further tasks/get of that task get 429 until the interval has passed; default: off'),
  sessionsPerPrincipal: z.number().int().min(1).prefault(256)
    .describe('sessions one authenticated principal may hold at once; initialize beyond it gets 429'),
  streamsPerSession: z.number().int().min(1).prefault(100)
    .describe('SSE streams a session may hold open at once on one gateway process (GET streams, tasks/result waits, 2026-07-28 listens per principal)'),
  streamStallTimeout: duration('close an SSE stream whose client has not read what is waiting for this long').prefault('60s'),
  streamBufferBytes: size('close an SSE stream instead of writing more when this much already waits unread by its client').prefault('16mb'),
  headersTimeout: duration('time a client has to send a request\'s headers').prefault('10s'),
  requestTimeout: duration('time a client has to send a whole request, body included').prefault('30s'),
  maxConnections: z.number().int().min(1).prefault(10_000)
    .describe('TCP connections the gateway accepts at once; further ones are closed at once'),
})

const storeSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('memory') }),
  z.strictObject({
    kind: z.literal('sqlite'),
    path: z.string().min(1).prefault('./data/gateway.db').describe('database file, created on first start'),
  }),
  z.strictObject({
    kind: z.literal('redis'),
    url: z.string().regex(/^rediss?:\/\//, 'must start with redis:// (or rediss:// for TLS)').prefault('redis://127.0.0.1:6379')
      .describe('Redis URL: redis://[user:password@]host:port[/db]; rediss:// for TLS; take the password from the environment'),
    prefix: z.string().min(1).prefault('mcp-task-gateway:').describe('prefix of every key the gateway writes'),
    password: z.string().min(1).optional()
      .describe('password (Redis AUTH) when the url carries none; take it from the environment, never write it inline'),
    caFile: z.string().min(1).optional()
      .describe('PEM file of the certificate authority that signed the Redis server certificate (rediss:// with a private CA)'),
  }).refine((store) => store.caFile === undefined || store.url.startsWith('rediss://'), {
    message: 'caFile needs a rediss:// url (TLS)',
    path: ['caFile'],
  }),
])

const adminSchema = z.strictObject({
  host: z.string().min(1).prefault('127.0.0.1')
    .describe('address of the admin API listener; keep it on loopback or a private network'),
  port: z.number().int().min(0).max(65_535)
    .describe('port of the admin API listener, not the MCP port; 0 picks a free port'),
  tokenSha256: z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be the hex SHA-256 of the admin token (64 hex digits), never the token itself')
    .describe('hex SHA-256 of the bearer token every admin request must carry (put it in the environment and write the variable here)'),
}).describe('the admin API (upstreams, every principal\'s tasks, cancel, drain) on its own listener; off unless configured')
const metricsSchema = z.strictObject({
  enabled: z.boolean().prefault(true).describe('collect Prometheus metrics and serve them at metrics.path'),
  listener: z.enum(['admin', 'main']).prefault('admin')
    .describe('where /metrics is served: admin (the admin listener, which must be configured) or main (the MCP listener, open to whoever reaches it)'),
  path: z.string().regex(/^\/[\w.~/-]*$/, 'must be a URL path starting with /').prefault('/metrics').describe('path of the Prometheus text exposition'),
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
