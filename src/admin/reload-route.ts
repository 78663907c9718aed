import type { FastifyInstance } from 'fastify'
import type { Config } from '../config/schema.ts'
import { GatewayError, errorMessage } from '../errors.ts'
import { configProblems, logRejectedReload, type ReloadReport } from '../reload/reloader.ts'
import type { ConfigChange } from '../reload/config-diff.ts'

export interface ReloadRouteDeps {
  /** Reads the configuration file the gateway was started with again; undefined when there is none. */
  source: (() => Promise<Config>) | undefined
  /** Puts a configuration in force (Gateway.reload). */
  apply (config: Config): Promise<ReloadReport>
}

/** The answer to a reload that was applied. */
export interface ReloadAnswer {
  status: 'applied'
  changes: ConfigChange[]
  /** Options that changed in the file but keep their running values until the next start. */
  notApplied: Array<{ option: string, reason: string }>
}

/** The answer to a reload that was refused: the file's problems, each with its YAML path. */
export interface ReloadRefusal {
  error: { code: string, message: string, problems: Array<{ path: string, message: string }> }
}

/** Status of a refused reload: the new file does not load (it is invalid, or cannot be read); nothing changed. */
const REFUSED = 422

/**
 * `POST /admin/reload`: reads the configuration file again and puts it in force, as SIGHUP does. A file that
 * does not load changes nothing and is answered 422 with every problem; otherwise the answer lists what
 * changed and which changed options need a restart.
 */
export function registerReloadRoute (app: FastifyInstance, deps: ReloadRouteDeps): void {
  app.post('/admin/reload', async (request, reply) => {
    if (deps.source === undefined) throw new GatewayError('GW_ERR_ADMIN_BAD_REQUEST', ['this gateway was not started from a configuration file (--config), so there is none to read again'])
    let next: Config
    try {
      next = await deps.source()
    } catch (err) {
      logRejectedReload(request.log, err, 'admin')
      const problems = configProblems(err)
      request.log.warn({ audit: 'config.reload', outcome: 'rejected', problems: problems.length }, 'configuration reload through the admin API rejected')
      const code = err instanceof GatewayError ? err.code : 'GW_ERR_CONFIG_READ'
      const body: ReloadRefusal = { error: { code, message: errorMessage(err), problems } }
      return reply.code(REFUSED).send(body)
    }
    const report = await deps.apply(next)
    request.log.warn({ audit: 'config.reload', outcome: 'applied', changes: report.changes.map((c) => `${c.path} ${c.change}`), restartOnly: report.restartOnly }, 'configuration reloaded through the admin API')
    const answer: ReloadAnswer = {
      status: 'applied',
      changes: report.changes,
      notApplied: report.restartOnly.map((option) => ({ option, reason: 'takes effect only at a restart; the running value stays' })),
    }
    return answer
  })
}
