// The table of Redis keys in docs/operations.md ("What is stored where") is what an operator sizes, backs up,
// inspects and cleans by: every key a gateway writes under its prefix must be listed there. A gateway on Redis is
// used as clients use it (a session, a call, a task that asks for input, a rate limit, a readiness probe) and
// every key it wrote is matched against the table; the key names the code builds are checked too, for keys this
// run does not write.
import { randomUUID } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { connectV1 } from '../helpers/clients.ts'
import { demoStdio, startGateway } from '../helpers/gateway.ts'
import { purge, REDIS_URL, STATE_SECRET } from '../helpers/redis.ts'
import { runTask } from '../helpers/tasks.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const REDIS_SOURCES = join(ROOT, 'src/store/redis')

/** The key patterns of the table, as regular expressions: `session:<id>` matches `session:` and anything after it. */
function documentedKeys (): Array<{ pattern: string, regex: RegExp }> {
  const page = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8')
  const start = page.indexOf('| keys | what | removed |')
  expect(start, 'docs/operations.md has the table of Redis keys').toBeGreaterThan(-1)
  const rows = page.slice(start).split('\n').slice(2).filter((line) => line.startsWith('|'))
  const end = page.slice(start).split('\n').slice(2).findIndex((line) => !line.startsWith('|'))
  return rows.slice(0, end === -1 ? undefined : end).flatMap((row) => {
    const keys = row.split('|')[1]!
    return [...keys.matchAll(/`([^`]+)`/g)].map(([, pattern]) => pattern!)
      .filter((pattern) => !pattern.startsWith('bus:')) // pub/sub channels, not keys
      .map((pattern) => ({
        pattern,
        regex: new RegExp(`^${pattern.split(/<[^>]+>/).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.+')}$`),
      }))
  })
}

/** The fixed part of every key name src/store/redis builds after the prefix: `task:`, `sessions`, … */
function keyNamesInCode (): string[] {
  const names = new Set<string>()
  for (const file of readdirSync(REDIS_SOURCES)) {
    const source = readFileSync(join(REDIS_SOURCES, file), 'utf8')
    // TypeScript `${prefix}name…` / `${this.#p}name…`, and Lua `p .. 'name…'` / `ARGV[n] .. 'name…'`.
    for (const match of source.matchAll(/\$\{(?:this\.#p|prefix)\}([a-z-]+:?)|(?:\bp|ARGV\[\d+\]) \.\. '([a-z-]+:?)'/g)) {
      names.add(match[1] ?? match[2]!)
    }
  }
  return [...names].filter((name) => name !== 'bus:').sort()
}

function undocumented (keys: readonly string[], documented: ReturnType<typeof documentedKeys>): string[] {
  return keys.filter((key) => !documented.some(({ regex }) => regex.test(key)))
}

describe('the Redis keys of docs/operations.md', () => {
  it('lists every key name the Redis store builds', () => {
    const names = keyNamesInCode()
    expect(names.length).toBeGreaterThan(15)
    // Each must be the fixed head of a pattern of the table (`rate:` of `rate:<kind>:<hash>`).
    const heads = new Set(documentedKeys().map(({ pattern }) => pattern.split('<')[0]))
    expect(names.filter((name) => !heads.has(name))).toEqual([])
  })

  it('lists every key a gateway writes while clients use it', async () => {
    const prefix = `mcpgw-keys:${randomUUID()}:`
    const gw = await startGateway({
      store: { kind: 'redis', url: REDIS_URL, prefix },
      server: { stateSecret: STATE_SECRET },
      // A bucket lives until it is full again: a slow refill keeps it for the scan below.
      limits: { requestsPerIp: { rate: 0.01, burst: 1000 } },
      upstreams: [demoStdio()],
    })
    const redis = new Redis(REDIS_URL)
    try {
      const client = await connectV1(gw.url, { onElicit: () => ({ action: 'accept', content: { name: 'Teal' } }) })
      await client.callTool({ name: 'demo__echo', arguments: { text: 'hello' } })
      const task = await runTask(client, 'demo__ask_user', { message: 'Colour?' })
      expect(task.result?.isError ?? false).toBe(false)
      expect((await fetch(`${gw.base}/readyz`)).status).toBe(200)

      const written: string[] = []
      let cursor = '0'
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500)
        cursor = next
        written.push(...keys.map((key) => key.slice(prefix.length)))
      } while (cursor !== '0')
      // What a session, a call, a task with input and a probe leave behind, so the check below is not vacuous.
      for (const kind of ['session:', 'task:', 'input:', 'home:', 'rate:', 'owners', 'epoch', 'revisions', 'readiness-probe']) {
        expect(written.some((key) => key.startsWith(kind)), `a key ${kind}…`).toBe(true)
      }
      expect(undocumented(written, documentedKeys())).toEqual([])
      await client.close()
    } finally {
      await gw.close()
      await redis.quit()
      await purge(prefix)
    }
  })
})
