import { readFileSync } from 'node:fs'
import type { FastifyInstance } from 'fastify'
import { TASK_STATUSES, TERMINAL_STATUSES } from '../wire/task-state.ts'

/** The dashboard's files, next to this module (the build copies them into dist with it). */
const DIRECTORY = new URL('./dashboard/', import.meta.url)

/** The dashboard's address on the admin listener. */
export const DASHBOARD_PATH = '/admin/dashboard'

const FILES = [
  { path: DASHBOARD_PATH, file: 'dashboard.html', type: 'text/html; charset=utf-8' },
  { path: `${DASHBOARD_PATH}/dashboard.js`, file: 'dashboard.js', type: 'text/javascript; charset=utf-8' },
  { path: `${DASHBOARD_PATH}/dashboard-view.js`, file: 'dashboard-view.js', type: 'text/javascript; charset=utf-8' },
  { path: `${DASHBOARD_PATH}/dashboard.css`, file: 'dashboard.css', type: 'text/css; charset=utf-8' },
] as const

/** The status machine's sets as a browser module, so the page never keeps a copy of its own. */
const TASK_STATES_MODULE = `export const TASK_STATUSES = ${JSON.stringify(TASK_STATUSES)}
export const TERMINAL_STATUSES = ${JSON.stringify(TERMINAL_STATUSES)}
`

/**
 * Only this origin's own files, no inline script or style, no framing; fetch() only to this origin (the admin
 * API). The token the page asks for is sent in headers, never in a URL, and kept in the tab's sessionStorage.
 */
const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
}

/**
 * The live dashboard: a static page, its stylesheet and its script modules (the task statuses among them,
 * from the status machine), read once at start and served without the admin token (they hold no data; the
 * page asks for the token and sends it with every request it makes). `/` leads to it.
 */
export function registerDashboard (app: FastifyInstance): void {
  for (const { path, file, type } of FILES) {
    const body = readFileSync(new URL(file, DIRECTORY))
    app.get(path, { config: { public: true } }, async (_request, reply) => await reply.headers(SECURITY_HEADERS).type(type).send(body))
  }
  app.get(`${DASHBOARD_PATH}/task-states.js`, { config: { public: true } }, async (_request, reply) =>
    await reply.headers(SECURITY_HEADERS).type('text/javascript; charset=utf-8').send(TASK_STATES_MODULE))
  app.get('/', { config: { public: true } }, async (_request, reply) => await reply.redirect(DASHBOARD_PATH))
}
