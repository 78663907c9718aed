import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { REPO_ROOT } from '../fixtures/spawn-upstream.ts'

export interface GatewayProcess {
  child: ChildProcess
  url: string
  /** Log lines (JSON) seen so far. */
  lines: string[]
  exited: Promise<[number | null, NodeJS.Signals | null]>
}

/** A YAML `upstreams` entry (2-space indented list item) for the demo upstream over stdio. */
export function demoStdioYaml (name = 'demo'): string {
  return `  - name: ${name}
    transport: stdio
    command: ${JSON.stringify(process.execPath)}
    args: [--import, tsx, src/demo/main.ts]`
}

/** Writes a YAML config into a fresh temporary directory and returns its path. */
export function writeConfig (yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-test-'))
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, yaml)
  return file
}

/**
 * Starts the real CLI (`src/main.ts`) as a child process and waits until it listens and every upstream's
 * first connect has ended (`upstreams started`; the gateway itself serves before that).
 */
export async function startGatewayProcess (configFile: string, args: string[] = []): Promise<GatewayProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', '--config', configFile, '--port', '0', ...args], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
  const lines: string[] = []
  createInterface({ input: child.stderr! }).on('line', (line) => lines.push(line))
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${lines.join('\n')}`)), 20_000)
    let address: string | undefined
    createInterface({ input: child.stdout! }).on('line', (line) => {
      lines.push(line)
      if (line.includes('"gateway listening"')) address = (JSON.parse(line) as { address: string }).address
      if (line.includes('"upstreams started"') && address !== undefined) {
        clearTimeout(timer)
        resolve(address)
      }
    })
    void exited.then(([code]) => reject(new Error(`gateway exited with ${code}:\n${lines.join('\n')}`)))
  })
  return { child, url, lines, exited }
}
