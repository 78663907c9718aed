// Every problem of a configuration at once, one problem per cause, and ${VAR} values that keep the YAML type
// they were written with (a quoted scalar stays a string).
/* eslint-disable no-template-curly-in-string -- the strings below are YAML with ${VAR} placeholders, on purpose */
import { describe, expect, it } from 'vitest'
import { parseConfigText, type ConfigProblem } from '../../src/config/load.ts'
import { GatewayError } from '../../src/errors.ts'

/** The problems a configuration text produces (fails the test when it loads). */
function problemsOf (text: string, env: Record<string, string> = {}): ConfigProblem[] {
  try {
    parseConfigText(text, env)
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError)
    expect((err as GatewayError).code).toBe('GW_ERR_CONFIG_INVALID')
    return (err as GatewayError).data as ConfigProblem[]
  }
  throw new Error('expected the configuration to be rejected')
}

const paths = (problems: readonly ConfigProblem[]): string[] => problems.map((p) => p.path).sort()

describe('a wrong or missing transport', () => {
  it('is reported together with the other problems of its upstream and of the file', () => {
    const text = [
      'server: { port: 70000 }',
      'upstreams:',
      '  - { name: "bad name", transport: http, url: "http://127.0.0.1:1/mcp", maxConcurrentCalls: 0, timeouts: { connect: soon } }',
      '  - { name: b, transport: stdio, command: node, idleTimeout: 10 parsecs }',
    ].join('\n')
    const problems = problemsOf(text)
    expect(paths(problems)).toEqual([
      'server.port',
      'upstreams[0].maxConcurrentCalls',
      'upstreams[0].name',
      'upstreams[0].timeouts.connect',
      'upstreams[0].transport',
      'upstreams[1].idleTimeout',
    ])
    expect(problems.find((p) => p.path === 'upstreams[0].transport')?.message).toMatch(/stdio.*streamable-http.*sse/)
  })

  it('when missing, is reported with the problems of the options the upstream has', () => {
    const problems = problemsOf('upstreams:\n  - { name: a, command: node, args: oops, colour: blue }\n')
    expect(paths(problems)).toEqual(['upstreams[0]', 'upstreams[0].args', 'upstreams[0].transport'])
    expect(problems.find((p) => p.path === 'upstreams[0]')?.message).toContain("'colour'")
  })

  it('on an upstream with neither command nor url still reports the options every upstream has', () => {
    const problems = problemsOf('upstreams:\n  - { name: a, maxSessions: 0 }\n')
    expect(paths(problems)).toEqual(['upstreams[0].maxSessions', 'upstreams[0].transport'])
  })
})

describe('an unset variable', () => {
  it('in a numeric field is one problem, naming the variable', () => {
    const problems = problemsOf('server:\n  port: ${GATEWAY_PORT}\nupstreams:\n  - { name: a, transport: stdio, command: node }\n')
    expect(problems).toEqual([{ path: 'server.port', message: expect.stringContaining('GATEWAY_PORT is not set') }])
  })

  it('in a duration or a url is one problem too', () => {
    const problems = problemsOf('upstreams:\n  - { name: a, transport: streamable-http, url: "${URL}", idleTimeout: "${IDLE}" }\n')
    expect(problems).toEqual([
      { path: 'upstreams[0].url', message: expect.stringContaining('URL is not set') },
      { path: 'upstreams[0].idleTimeout', message: expect.stringContaining('IDLE is not set') },
    ])
  })
})

describe('the type of an interpolated value', () => {
  it('stays a string when the scalar is quoted, in a stdio upstream\'s env and elsewhere', () => {
    const text = [
      'server:',
      '  host: "${HOST:-127.0.0.1}"',
      'upstreams:',
      '  - name: a',
      '    transport: stdio',
      '    command: node',
      '    args: ["${ARG:-42}"]',
      '    env:',
      '      TIMEOUT_MS: "${TIMEOUT_MS:-5000}"',
      '      VERBOSE: \'${VERBOSE:-false}\'',
      '      RETRIES: "${RETRIES}"',
    ].join('\n')
    const config = parseConfigText(text, { RETRIES: '3' })
    expect(config.upstreams[0]).toMatchObject({ args: ['42'], env: { TIMEOUT_MS: '5000', VERBOSE: 'false', RETRIES: '3' } })
  })

  it('of a plain scalar where a string is expected is refused with a hint to quote it', () => {
    const problems = problemsOf('upstreams:\n  - name: a\n    transport: stdio\n    command: node\n    env:\n      LEVEL: ${LEVEL:-3}\n')
    expect(problems).toEqual([{ path: 'upstreams[0].env.LEVEL', message: expect.stringContaining('write it in quotes to keep it a string') }])
  })

  it('follows the variable when the scalar is plain', () => {
    const text = 'server:\n  port: ${PORT:-8080}\n  dnsRebindingProtection: ${DNS:-true}\nupstreams:\n  - { name: a, transport: stdio, command: node }\n'
    const config = parseConfigText(text, { PORT: '9090' })
    expect(config.server).toMatchObject({ port: 9090, dnsRebindingProtection: true })
  })
})
