import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { MemoryStore } from '../../src/store/memory/memory-store.ts'
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import { sessionStoreContract } from './session-store.contract.ts'

sessionStoreContract('memory', async () => new MemoryStore())
sessionStoreContract('sqlite', async () => new SqliteStore(join(mkdtempSync(join(tmpdir(), 'gw-sqlite-')), 'gateway.db')))

describe('sqlite store', () => {
  it('keeps sessions across a reopen of the same file', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'gw-sqlite-')), 'gateway.db')
    const first = new SqliteStore(file)
    await first.sessions.create({ id: 's1', principal: 'p', protocolVersion: '2025-11-25', clientCapabilities: {}, clientInfo: { name: 'c' }, createdAt: 1, lastSeenAt: 1 })
    await first.close()
    const second = new SqliteStore(file)
    expect(await second.sessions.get('s1')).toMatchObject({ principal: 'p' })
    await second.close()
  })
})
