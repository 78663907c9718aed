import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'

interface Rule {
  alert?: string
  expr: string
  for?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}
interface RuleFile { groups: Array<{ name: string, rules: Rule[] }> }

const RULES = 'deploy/prometheus/alerts.yaml'

/** Words of PromQL that are not metric names (functions are recognised by the `(` after them). */
const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool', 'inf', 'nan'])

/** The metric names an expression reads: label matchers, strings, ranges and grouping lists taken out first. */
export function metricNames (expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
  const names = new Set<string>()
  for (const match of bare.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    if (match[2] !== undefined || KEYWORDS.has(match[1]!.toLowerCase())) continue
    names.add(match[1]!)
  }
  return [...names]
}

/** The sample names a scrape can hold: every family it declares, with the series names of its histograms. */
function exposed (exposition: string): Set<string> {
  const names = new Set<string>()
  for (const line of exposition.split('\n')) {
    const typed = /^# TYPE (\S+) (\S+)/.exec(line)
    if (typed === null) continue
    names.add(typed[1]!)
    if (typed[2] === 'histogram' || typed[2] === 'summary') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${typed[1]!}${suffix}`)
  }
  return names
}

describe('the Prometheus alert rules', () => {
  const file = parse(readFileSync(RULES, 'utf8')) as RuleFile
  const rules = file.groups.flatMap((group) => group.rules)
  let gw: RunningGateway

  beforeAll(async () => {
    gw = await startGateway({ upstreams: [demoStdio()], admin: { port: 0, tokenSha256: sha256Hex('alerts-admin-token') } })
  })
  afterAll(async () => { await gw?.close() })

  it('alert on an upstream down, the store not ready, queue depth, refusals and failovers', () => {
    const exprs = rules.map((rule) => rule.expr).join('\n')
    for (const metric of ['gateway_upstream_up', 'gateway_store_up', 'gateway_upstream_calls_queued', 'gateway_refusals_total', 'gateway_task_failovers_total']) {
      expect(exprs, metric).toContain(metric)
    }
    for (const rule of rules) {
      expect(rule.alert, rule.expr).toMatch(/^Gateway[A-Z][A-Za-z]+$/)
      expect(rule.labels?.severity, rule.alert).toMatch(/^(warning|critical)$/)
      expect(rule.annotations?.summary, rule.alert).toBeTruthy()
    }
  })

  it('name only metrics the gateway serves', async () => {
    const res = await gw.gateway.admin!.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer alerts-admin-token' } })
    expect(res.statusCode).toBe(200)
    const served = exposed(res.body)
    const missing = rules.flatMap((rule) => metricNames(rule.expr).filter((name) => !served.has(name)).map((name) => `${String(rule.alert)}: ${name}`))
    expect(missing).toEqual([])
    // The parser above finds what it should: a rule naming a metric that does not exist would be caught.
    expect(metricNames('sum by (upstream) (rate(gateway_nope_total{limit="x"}[5m])) > 0 and on() gateway_upstream_up == 0')).toEqual(['gateway_nope_total', 'gateway_upstream_up'])
  })
})
