import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { gatewayForSuite } from '../helpers/gateway.ts'

/** `npm run demo` keeps working: it creates a task on the demo's slow tool and prints progress and result. */
describe('the task example script', () => {
  const gw = gatewayForSuite()

  it('prints the task, its progress and its result', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'examples/task-demo.ts', gw.url, 'demo__slow', '300'], { cwd: REPO_ROOT })
    expect(stdout).toMatch(/task created: [A-Za-z0-9_-]{22}/)
    expect(stdout).toContain('progress')
    expect(stdout).toContain('slow finished: 5 steps in 300 ms')
  })
})
