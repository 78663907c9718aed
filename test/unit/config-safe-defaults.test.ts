// What a configuration may not do silently: open the MCP listener to other machines with auth off, allow
// origins that mean something else than they seem (`null`, wildcards), or echo a value taken from the
// environment (a secret, possibly) in the problems it reports.
/* eslint-disable no-template-curly-in-string -- the strings below are YAML with ${VAR} placeholders, on purpose */
import { describe, expect, it } from 'vitest'
import { parseConfigText, type ConfigProblem } from '../../src/config/load.ts'
import { GatewayError } from '../../src/errors.ts'

const UPSTREAM = 'upstreams:\n  - { name: a, transport: stdio, command: node }\n'
const TOKEN = `auth:\n  tokens:\n    - { principal: ci, sha256: ${'a'.repeat(64)} }\n`

/** The problems a configuration text produces (fails the test when it loads). */
function problemsOf (text: string, env: Record<string, string> = {}): { message: string, problems: ConfigProblem[] } {
  try {
    parseConfigText(text, env)
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError)
    expect((err as GatewayError).code).toBe('GW_ERR_CONFIG_INVALID')
    return { message: (err as GatewayError).message, problems: (err as GatewayError).data as ConfigProblem[] }
  }
  throw new Error('expected the configuration to be rejected')
}

describe('a listener on an address other machines reach', () => {
  it('is refused with auth off, naming server.host and what to set', () => {
    for (const host of ['0.0.0.0', '::', '10.1.2.3', 'gateway.internal']) {
      const { problems } = problemsOf(`server:\n  host: "${host}"\n${UPSTREAM}`)
      expect(problems).toEqual([{ path: 'server.host', message: expect.stringContaining('server.allowUnauthenticated: true') }])
      expect(problems[0]!.message).toContain('auth.tokens or auth.oauth')
    }
  })

  it('is accepted with server.allowUnauthenticated, or with auth configured', () => {
    const open = parseConfigText(`server:\n  host: 0.0.0.0\n  allowUnauthenticated: true\n${UPSTREAM}`, {})
    expect(open.server).toMatchObject({ host: '0.0.0.0', allowUnauthenticated: true })
    expect(parseConfigText(`server:\n  host: 0.0.0.0\n${TOKEN}${UPSTREAM}`, {}).server.host).toBe('0.0.0.0')
  })

  it('on loopback needs nothing: the default, 127.0.0.0/8, ::1 and localhost', () => {
    for (const host of ['127.0.0.1', '127.0.0.2', '::1', '[::1]', 'localhost']) {
      expect(parseConfigText(`server:\n  host: "${host}"\n${UPSTREAM}`, {}).server.allowUnauthenticated).toBe(false)
    }
    expect(parseConfigText(UPSTREAM, {}).server.host).toBe('127.0.0.1')
  })
})

describe('server.allowedOrigins', () => {
  it('refuses null, wildcards and entries that are not an origin, each with a message', () => {
    const { problems } = problemsOf(`server:\n  allowedOrigins: ["null", "*", "https://*.example.com", "https://app.example.com/path", "app.example.com", "https://app.example.com:443"]\n${UPSTREAM}`)
    expect(problems.map((p) => p.path)).toEqual([0, 1, 2, 3, 4, 5].map((i) => `server.allowedOrigins[${i}]`))
    expect(problems[0]!.message).toMatch(/'null' is refused: it is the Origin of sandboxed frames/)
    expect(problems[1]!.message).toMatch(/wildcards are not supported/)
    expect(problems[2]!.message).toMatch(/wildcards are not supported/)
    expect(problems[3]!.message).toMatch(/not an origin as browsers send it \('https:\/\/app\.example\.com'\)/)
    expect(problems[4]!.message).toMatch(/is not an origin/)
    expect(problems[5]!.message).toMatch(/no path, query or default port/)
  })

  it('accepts origins written in full, with a port, a trailing slash or another scheme', () => {
    const origins = ['https://app.example.com', 'http://localhost:5173', 'https://App.Example.com/', 'chrome-extension://abcdefghijklmnop']
    const config = parseConfigText(`server:\n  allowedOrigins: ${JSON.stringify(origins)}\n${UPSTREAM}`, {})
    expect(config.server.allowedOrigins).toEqual(origins)
  })
})

describe('a value from the environment', () => {
  const SECRET = 'sk-live-0123456789abcdef'

  it('in a duration field is never in the problem: it says the value of ${VAR} and the path', () => {
    const { message, problems } = problemsOf(`server:\n  sessionIdleTimeout: \${IDLE}\n  sseKeepAlive: "\${KEEP:-15s}"\n${UPSTREAM}`, { IDLE: SECRET, KEEP: 'x' })
    expect(message).not.toContain(SECRET)
    expect(JSON.stringify(problems)).not.toContain(SECRET)
    expect(problems).toEqual([
      { path: 'server.sessionIdleTimeout', message: expect.stringMatching(/^the value of \$\{IDLE\} is not a duration; write e\.g\. 500ms/) },
      { path: 'server.sseKeepAlive', message: expect.stringMatching(/^the value of \$\{KEEP\} is not a duration/) },
    ])
  })

  it('in part of a string, or echoed by a problem at another path, is hidden too', () => {
    const text = 'server:\n  allowedOrigins: ["https://${ORIGIN}/x"]\nupstreams:\n  - { name: "${NAME}", transport: stdio, command: node }\n  - { name: "${NAME}", transport: stdio, command: node }\n'
    const name = 'upstream-named-by-a-secret'
    const { message, problems } = problemsOf(text, { ORIGIN: SECRET, NAME: name })
    for (const value of [SECRET, name]) expect(message).not.toContain(value)
    expect(problems).toContainEqual({ path: 'server.allowedOrigins[0]', message: expect.stringContaining("the value of 'https://${ORIGIN}/x' is not an origin") })
    expect(problems).toContainEqual({ path: 'upstreams[1].name', message: 'duplicate upstream name the value of ${NAME} (also upstreams[0])' })
  })

  it('written in the file, or taken from a default, is shown as it is', () => {
    const { problems } = problemsOf(`server:\n  sessionIdleTimeout: soon\n  sseKeepAlive: \${KEEP:-often}\n${UPSTREAM}`, {})
    expect(problems.map((p) => p.message)).toEqual([expect.stringMatching(/^'soon' is not a duration/), expect.stringMatching(/^'often' is not a duration/)])
  })
})
