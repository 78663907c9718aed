import { describe, expect, it } from 'vitest'
import { GatewayError, RpcError } from '../../src/errors.ts'
import { RecentProblems } from '../../src/observability/recent-problems.ts'

describe('RecentProblems', () => {
  it('keeps the newest problems, newest first, and counts every one by kind, code and source', () => {
    const problems = new RecentProblems(3)
    for (let i = 0; i < 4; i++) problems.record('refusal', 'maxActivePerPrincipal', new GatewayError('GW_ERR_TASK_LIMIT', [i, 4]))
    problems.record('error', 'upstream demo', new RpcError(-32011, 'quota exceeded'))
    problems.record('error', 'store tasks.get', new Error('disk'))

    const { counts, recent } = problems.snapshot()
    expect(counts).toEqual([
      { kind: 'refusal', code: 'GW_ERR_TASK_LIMIT', source: 'maxActivePerPrincipal', count: 4 },
      { kind: 'error', code: 'RPC_ERROR', source: 'upstream demo', count: 1 },
      { kind: 'error', code: 'INTERNAL', source: 'store tasks.get', count: 1 },
    ])
    expect(recent.map((p) => [p.kind, p.code, p.message])).toEqual([
      ['error', 'INTERNAL', 'disk'],
      ['error', 'RPC_ERROR', 'quota exceeded'],
      ['refusal', 'GW_ERR_TASK_LIMIT', new GatewayError('GW_ERR_TASK_LIMIT', [3, 4]).message],
    ])
  })

  it('attribute() names who made the request on the problem its error became, a session without auth by its fingerprint', () => {
    const problems = new RecentProblems()
    const refused = new GatewayError('GW_ERR_TASK_LIMIT', [1, 1])
    const failed = new RpcError(-32011, 'quota exceeded')
    problems.record('refusal', 'maxActivePerPrincipal', refused)
    problems.record('error', 'upstream demo', failed)
    problems.attribute(refused, { principal: 'anonymous:the-session-id', address: '192.0.2.7' })
    problems.attribute(failed, { principal: 'ops', address: undefined })
    // An error that became no problem, and a second answer of the same one, change nothing.
    problems.attribute(new Error('not recorded'), { principal: 'x', address: 'y' })
    problems.attribute(refused, { principal: 'someone else', address: '198.51.100.1' })

    const [upstream, limit] = problems.snapshot().recent
    expect(limit).toMatchObject({ principal: expect.stringMatching(/^anonymous:sha256:[0-9a-f]{12}$/), address: '192.0.2.7' })
    expect(JSON.stringify(limit)).not.toContain('the-session-id')
    expect(upstream).toMatchObject({ principal: 'ops' })
    expect(upstream).not.toHaveProperty('address')
  })

  it('tells its listeners of each new problem until they stop, and shortens long messages', () => {
    const problems = new RecentProblems()
    const heard: string[] = []
    const stop = problems.listen((problem) => heard.push(problem.source))
    problems.record('error', 'upstream a', new Error('x'.repeat(2000)))
    stop()
    problems.record('error', 'upstream b', new Error('y'))
    expect(heard).toEqual(['upstream a'])
    expect(problems.snapshot().recent[1]!.message).toHaveLength(500)
  })
})
