// The gateway's command line, run as a process: usage, unknown commands and options, --check exit codes.
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { GATEWAY_MAIN } from '../helpers/built.ts'

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
const EXAMPLE_FILE = join(REPO_ROOT, 'config/gateway.example.yaml')
/** The variables the example configuration needs. */
const EXAMPLE_ENV = { API_TOKEN: 'test-token' }

describe('the command line', () => {
  const execFileAsync = promisify(execFile)
  let dir: string

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mcp-task-gateway-cli-'))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  /** Runs src/main.ts with a small, known environment (the variables of the test process could change the result). */
  async function cli (args: string[], env: Record<string, string> = {}): Promise<{ code: number, stdout: string, stderr: string }> {
    const base = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir() }
    try {
      const { stdout, stderr } = await execFileAsync(process.execPath, [GATEWAY_MAIN, ...args], {
        cwd: REPO_ROOT,
        env: { ...base, ...env },
        timeout: 20_000,
      })
      return { code: 0, stdout, stderr }
    } catch (err) {
      const failed = err as { code?: unknown, stdout?: string, stderr?: string }
      if (typeof failed.code !== 'number') throw err
      return { code: failed.code, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' }
    }
  }

  it('--help prints the usage and exits 0', async () => {
    const result = await cli(['--help'])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('Usage: mcp-task-gateway --config <file>')
    expect(result.stdout).toContain('--check')
  })

  it('names the backup command in the usage, and refuses a command it does not know or --to without backup', async () => {
    expect((await cli(['--help'])).stdout).toContain('mcp-task-gateway backup --config <file> --to <new file>')
    const unknown = await cli(['restore', '--config', EXAMPLE_FILE])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain("unknown command 'restore'")
    const stray = await cli(['--config', EXAMPLE_FILE, '--to', join(dir, 'x.db')])
    expect(stray.code).toBe(2)
    expect(stray.stderr).toContain('--to belongs to the backup command')
  })

  it('--config with a missing file exits non-zero and names the file', async () => {
    const missing = join(dir, 'missing.yaml')
    const result = await cli(['--config', missing])
    expect(result.code).not.toBe(0)
    expect(result.stderr).toContain(missing)
  })

  it('--check on a configuration with two errors exits 2 and prints both paths', async () => {
    const file = join(dir, 'two-errors.yaml')
    await writeFile(file, [
      'upstreams:',
      '  - { name: a, transport: stdio, command: node, maxQueuedCalls: -1 }',
      '  - { name: b, transport: streamable-http, url: not-a-url }',
      '',
    ].join('\n'))
    const result = await cli(['--config', file, '--check'])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('upstreams[0].maxQueuedCalls')
    expect(result.stderr).toContain('upstreams[1].url')
    expect(result.stderr).toContain(file)
  })

  it('--check on the example exits 0 without starting anything', async () => {
    const result = await cli(['--config', EXAMPLE_FILE, '--check'], EXAMPLE_ENV)
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('configuration is valid (3 upstreams)')
  })
})
