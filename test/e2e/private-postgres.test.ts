import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PrivatePostgres } from '../helpers/private-postgres.ts'

/** The fault tests' own PostgreSQL server: it keeps what was committed across a restart and a kill -9. */
describe('a private PostgreSQL server', () => {
  let server: PrivatePostgres

  beforeAll(async () => {
    server = await PrivatePostgres.start()
  })

  afterAll(async () => {
    await server?.close()
  })

  it('keeps committed rows across a fast restart and a kill -9 of its postmaster', async () => {
    await server.sql('CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)')
    await server.restart()
    await server.sql('INSERT INTO kept VALUES (2)')

    const before = server.postmasterPid()
    await server.kill9()
    await expect(server.sql('SELECT 1')).rejects.toThrow(/connection|server/i)
    await server.start()
    expect(server.postmasterPid()).not.toBe(before)
    expect(await server.sql('SELECT string_agg(n::text, \',\' ORDER BY n) FROM kept')).toBe('1,2')

    await server.stop()
    await expect(server.sql('SELECT 1')).rejects.toThrow(/connection|server/i)
    await server.start()
    expect(await server.sql('SELECT count(*) FROM kept')).toBe('2')
  })
})
