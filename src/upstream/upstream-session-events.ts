import { GatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import { GATEWAY_KEY } from './client-ref.ts'
import type { UpstreamEvents } from './upstream-events.ts'
import type { SessionEvents, UpstreamSession } from './upstream-session.ts'
import type { Upstream } from './upstream.ts'

/**
 * What the sessions of `upstream` report, passed on to the gateway (`events`): list changes, resource updates,
 * and what the upstream sends outside a call, which only a per-client session has a client to hand to.
 */
export function upstreamSessionEvents (
  upstream: Upstream,
  events: UpstreamEvents,
  log: Logger,
  closed: (session: UpstreamSession) => void,
): SessionEvents {
  return {
    onListChanged: (session, kind) => events.onListChanged(upstream, session, kind),
    onResourceUpdated: (session, params) => events.onResourceUpdated(upstream, session, params),
    onOrphanRequest: async (session, method, params, signal) => {
      if (session.key === GATEWAY_KEY || upstream.config.sessions !== 'per-client') {
        throw new GatewayError('GW_ERR_INTERNAL', [`'${method}' arrived while no call was in flight on a session that serves no single client, so there is nobody to ask`])
      }
      return await events.onOrphanRequest(upstream, session, method, params, signal)
    },
    onOrphanNotification: (session, method, params) => {
      if (session.key !== GATEWAY_KEY && upstream.config.sessions === 'per-client') events.onOrphanNotification(upstream, session, method, params)
    },
    onResultWithoutType: () => {
      if (upstream.resultsWithoutResultType++ === 0) log.warn('upstream sent a 2026-07-28 result without resultType (it must say "complete"); taken as complete, counted in /readyz, not logged again')
    },
    onClosed: closed,
  }
}
