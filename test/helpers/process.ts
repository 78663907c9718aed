import { spawn, type ChildProcess } from 'node:child_process'
import { EventEmitter, once } from 'node:events'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterAll } from 'vitest'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'
import { DEMO_MAIN, GATEWAY_MAIN } from './built.ts'

const started = new Set<ChildProcess>()

// A test that fails or times out half-way leaves its gateway processes running, and they would slow every
// file after it: whatever is still running when the file ends is killed.
afterAll(async () => {
  const running = [...started].filter((child) => child.exitCode === null && child.signalCode === null)
  await Promise.all(running.map(async (child) => {
    const exited = once(child, 'exit')
    child.kill('SIGKILL')
    await exited
  }))
})

export interface GatewayProcess {
  child: ChildProcess
  url: string
  /** Log lines (JSON) seen so far. */
  lines: string[]
  /** Emits `line` for every log line as it arrives (see `loggedLine`). */
  output: EventEmitter
  /** Settles when both output pipes are read to their end: no more lines will come. */
  drained: Promise<unknown>
  exited: Promise<[number | null, NodeJS.Signals | null]>
}

/** A YAML `upstreams` entry (2-space indented list item) for the demo upstream over stdio. */
export function demoStdioYaml (name = 'demo'): string {
  return `  - name: ${name}
    transport: stdio
    command: ${JSON.stringify(process.execPath)}
    args: [${DEMO_MAIN}]`
}

/** Writes a YAML config into a fresh temporary directory and returns its path. */
export function writeConfig (yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-test-'))
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, yaml)
  return file
}

/**
 * Starts the real CLI (compiled, `dist/main.js`) as a child process and waits until it listens and every upstream's
 * first connect has ended (`upstreams started`; the gateway itself serves before that).
 */
export async function startGatewayProcess (
  configFile: string,
  args: string[] = [],
  options: { launcher?: string[] } = {},
): Promise<GatewayProcess> {
  // `launcher`: a command that runs the gateway's command line it is given last (and execs it: the child is the gateway).
  const [command, ...commandArgs] = [...options.launcher ?? [], process.execPath, GATEWAY_MAIN, '--config', configFile, '--port', '0', ...args]
  const child = spawn(command!, commandArgs, {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  started.add(child)
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
  void exited.then(() => started.delete(child))
  const lines: string[] = []
  const output = new EventEmitter()
  const record = (line: string): void => {
    lines.push(line)
    output.emit('line', line)
  }
  const stderr = createInterface({ input: child.stderr! }).on('line', record)
  const stdout = createInterface({ input: child.stdout! })
  // A child's exit can precede its last lines: the pipes' ends say when there will be no more.
  const drained = Promise.all([once(stderr, 'close'), once(stdout, 'close')])
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${lines.join('\n')}`)), 45_000)
    let address: string | undefined
    stdout.on('line', (line) => {
      record(line)
      if (line.includes('"gateway listening"')) address = (JSON.parse(line) as { address: string }).address
      if (line.includes('"upstreams started"') && address !== undefined) {
        clearTimeout(timer)
        resolve(address)
      }
    })
    void exited.then(([code]) => reject(new Error(`gateway exited with ${code}:\n${lines.join('\n')}`)))
  })
  return { child, url, lines, output, drained, exited }
}

/** Stops every process of `processes` still running (SIGTERM) and waits for each to exit. */
export async function stopAll (processes: readonly GatewayProcess[]): Promise<void> {
  for (const gateway of processes) if (gateway.child.exitCode === null && gateway.child.signalCode === null) gateway.child.kill('SIGTERM')
  await Promise.all(processes.map(async (gateway) => await gateway.exited))
}

/**
 * Resolves with the first log line of `gateway`, from index `from` on, that contains `text` (or satisfies it),
 * as soon as it is written; fails when the process exits first or after `timeoutMs` (a guard against hangs).
 */
export async function loggedLine (
  gateway: GatewayProcess,
  text: string | ((line: string) => boolean),
  options: { from?: number, timeoutMs?: number } = {},
): Promise<string> {
  const matches = typeof text === 'string' ? (line: string) => line.includes(text) : text
  const seen = gateway.lines.slice(options.from ?? 0).find(matches)
  if (seen !== undefined) return seen
  const timeoutMs = options.timeoutMs ?? 20_000
  return await new Promise<string>((resolve, reject) => {
    let settled = false
    const onLine = (line: string): void => {
      if (settled || !matches(line)) return
      done()
      resolve(line)
    }
    const fail = (why: string): void => {
      if (settled) return
      done()
      reject(new Error(`the gateway process ${why} without logging ${String(text)}; it logged:\n${gateway.lines.slice(options.from ?? 0).join('\n')}`))
    }
    const timer = setTimeout(() => fail(`ran ${timeoutMs} ms`), timeoutMs)
    const done = (): void => {
      settled = true
      clearTimeout(timer)
      gateway.output.off('line', onLine)
    }
    gateway.output.on('line', onLine)
    void gateway.drained.then(() => fail('exited'))
  })
}
