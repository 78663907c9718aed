// The one list of what may differ between a foreign server reached directly and the same server behind the
// gateway (test/e2e/transparency.test.ts). Every entry names the servers (ids of test/transparency/servers.ts,
// `*` matches any run of characters, as in items), the era (omitted: both),
// the transcript item (`*` matches any run of characters) and the reason. An entry that no longer matches any
// difference fails the test, so the list stays true: delete it when the difference is gone.
//
// Item paths: `initialize/<field>`, `tools/list` (names in order, pages), `tools/list/<tool>` (its definition),
// `tools/call/<tool>` (valid arguments; `#invalid`: arguments that break the schema), `prompts/…`,
// `resources/…`, `completion/complete/…`, `logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`,
// `notifications` (methods of the notifications received, progress aside), `requests/<method>` (how often the
// server asked the client) and `requests/<method>#params` (what it asked), `every-capability/tools/list` (the tools
// a 2025-11-25 client that declares every capability, tasks included, sees).
import type { Era } from './sessions.ts'

export interface AllowEntry {
  /** Server ids or patterns. */
  server: string | string[]
  era?: Era
  item: string
  reason: string
  /** Issue 28 items whose fix removes the difference: the entry is deleted with the fix. */
  goesAwayWith?: number[]
  /** A bug of the gateway, found by this test and reported: the entry is deleted with its fix. */
  bug?: true
  /** The difference depends on timing and does not show in every run: not reported when it matched nothing. */
  sometimes?: true
}

/** Servers that offer only tools (no prompts, resources, completions or logging). */
const TOOLS_ONLY = ['calc', 'filesystem', 'sequential-thinking']
const NO_PROMPTS = [...TOOLS_ONLY, 'memory']
const EVERYTHING = 'everything-*'
const UNKNOWN = 'transparency-no-such-name'
const METHOD_NOT_OFFERED = 'No upstream offers the method: the gateway answers it itself with -32601, naming the method ("Method not found: prompts/list"); the server says "Method not found".'

export const ALLOW_LIST: AllowEntry[] = [
  // ——— By design: what the gateway is, and what the era a client speaks changes ———
  {
    server: '*',
    item: 'initialize/serverInfo',
    reason: 'The client talks to the gateway, one endpoint in front of any number of servers: it names itself.',
  },
  {
    server: NO_PROMPTS,
    era: '2025-11-25',
    item: 'initialize/capabilities/tasks',
    reason: 'Tasks are the gateway\'s own: any tool of any upstream can run as a task, whatever the server offers.',
  },
  {
    server: '*',
    era: '2026-07-28',
    item: 'initialize/capabilities/extensions',
    reason: 'The gateway\'s own tasks, as the 2026-07-28 tasks extension (2026-07-28 clients).',
  },
  {
    server: EVERYTHING,
    era: '2026-07-28',
    item: 'initialize/capabilities/tasks',
    reason: 'In 2026-07-28 tasks are the extension, not the 2025 `tasks` capability; directly the SDK v2 client spoke 2025-11-25 (the server has no 2026-07-28).',
  },
  {
    server: '*',
    era: '2025-11-25',
    item: 'tools/list/*#execution',
    reason: 'The gateway sets every tool\'s taskSupport by its task policy (default `optional`, `toolSettings.<tool>.taskSupport`; Tasks, Which tools run as tasks).',
  },
  {
    server: '*',
    era: '2026-07-28',
    item: 'tools/list/*#execution',
    reason: 'A 2026-07-28 tool has no taskSupport (with the tasks extension the server decides per call); directly the SDK v2 client spoke 2025-11-25.',
  },
  {
    server: EVERYTHING,
    item: 'tools/call/simulate-research-query',
    reason: 'The server runs this tool only as a task (`required`); the gateway lists it `optional` and runs a plain call as a task upstream, answering with its result (Tasks, Which tools run as tasks). Directly a plain call is refused.',
  },
  {
    server: EVERYTHING,
    item: 'tools/call/simulate-research-query#invalid',
    reason: 'The same tool with invalid arguments: the gateway calls it upstream as a task, and the server answers a task-augmented call whose tool refused its arguments with its own -32602 "Invalid task creation result" (its SDK finds no task in the tool\'s isError result). Directly the plain call is refused before it is sent.',
  },
  {
    server: EVERYTHING,
    era: '2026-07-28',
    item: 'tools/call/*#progress',
    reason: 'Through the gateway the call asks for input in 2026-07-28 rounds (MRTR), and the SDK v2 client reports each round to onprogress ("Fulfilling input required …"); directly the server pushed its request.',
  },
  {
    server: '*',
    era: '2026-07-28',
    item: 'resources/read/*#cache',
    reason: '2026-07-28 results carry the caching hints ttlMs and cacheScope (server.listCacheTtl); directly the client spoke 2025-11-25.',
  },
  {
    server: EVERYTHING,
    era: '2026-07-28',
    item: 'notifications',
    reason: 'A 2026-07-28 client has no session stream: list changes and log messages outside a call come only on a subscriptions/listen stream (a client that opens none gets none); directly the SDK v2 client spoke 2025-11-25 with a session.',
  },
  {
    server: 'everything-http',
    era: '2025-11-25',
    item: 'notifications',
    reason: 'The server registers its conditional tools once initialized and says so (tools/list_changed) on its GET stream; a direct client opens that stream after notifications/initialized and most often loses the notification, the gateway opens it before (Timing) and relays it.',
    sometimes: true,
  },
  {
    server: [EVERYTHING, 'filesystem'],
    era: '2026-07-28',
    item: 'requests/roots/list*',
    reason: 'The server asks for roots when its session opens, outside any call: a 2026-07-28 client cannot be asked then (Upstream sessions); server-filesystem keeps the directories it was started with.',
  },
  {
    server: EVERYTHING,
    item: 'tools/call/trigger-long-running-operation#progress',
    reason: 'Directly the last progress notification may arrive in the same read as the result, and both SDK clients, which handle a notification a microtask after a response, drop it; through the gateway it arrives on its own and is kept.',
    sometimes: true,
  },

  {
    server: NO_PROMPTS,
    era: '2025-11-25',
    item: 'logging/setLevel',
    reason: METHOD_NOT_OFFERED,
  },
  {
    server: NO_PROMPTS,
    era: '2025-11-25',
    item: 'prompts/list',
    reason: METHOD_NOT_OFFERED,
  },
  {
    server: NO_PROMPTS,
    item: `prompts/get/${UNKNOWN}`,
    reason: METHOD_NOT_OFFERED,
  },
  ...['resources/list', 'resources/templates/list', 'resources/subscribe', 'resources/unsubscribe'].map((item): AllowEntry => ({
    server: TOOLS_ONLY,
    era: '2025-11-25',
    item,
    reason: METHOD_NOT_OFFERED,
  })),
  {
    server: TOOLS_ONLY,
    item: `resources/read/${UNKNOWN}`,
    reason: METHOD_NOT_OFFERED,
  },

  // ——— Expected to go away with issue 28 item 1 (delete each entry with its fix) ———
  {
    server: 'filesystem',
    era: '2026-07-28',
    item: 'tools/call/*#progress',
    reason: 'The server\'s roots/list of session start, still unanswered when the first call starts, is given to that call and put to the client as an input round (the SDK v2 client reports it as progress).',
    goesAwayWith: [1],
    sometimes: true,
  },

]
