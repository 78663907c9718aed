import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { connectionConfig } from '../../src/store/postgres/postgres-connection.ts'
import { unavailable } from '../../src/store/postgres/postgres-errors.ts'

describe('the connection settings of the postgres store', () => {
  it('takes host, port, user, password and database from the url, decoded', () => {
    expect(connectionConfig({ url: 'postgres://gate%40way:p%3Ass@db.internal:6543/task%20db' })).toMatchObject({
      host: 'db.internal', port: 6543, user: 'gate@way', password: 'p:ss', database: 'task db', ssl: false,
    })
    expect(connectionConfig({ url: 'postgresql://[::1]/gw' })).toMatchObject({ host: '::1', port: 5432, database: 'gw' })
    expect(connectionConfig({ url: 'postgres:///gw?host=/var/run/postgresql' })).toMatchObject({ host: '/var/run/postgresql' })
  })

  it('takes store.password when the url carries none, and the url\'s when it does', () => {
    expect(connectionConfig({ url: 'postgres://gw@db/gw', password: 'from-secret' }).password).toBe('from-secret')
    expect(connectionConfig({ url: 'postgres://gw:inline@db/gw', password: 'from-secret' }).password).toBe('inline')
  })

  it('turns TLS on with sslmode, always verifying the server, against caFile when given', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-pg-ca-'))
    const ca = join(dir, 'ca.pem')
    writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n')
    expect(connectionConfig({ url: 'postgres://db/gw?sslmode=require' }).ssl).toEqual({ rejectUnauthorized: true })
    expect(connectionConfig({ url: 'postgres://db/gw?sslmode=verify-full', caFile: ca }).ssl).toEqual({ rejectUnauthorized: true, ca: expect.stringContaining('BEGIN CERTIFICATE') })
    expect(connectionConfig({ url: 'postgres://db/gw?sslmode=disable' }).ssl).toBe(false)
    expect(() => connectionConfig({ url: 'postgres://db/gw?sslmode=verify-full', caFile: join(dir, 'missing.pem') }))
      .toThrow(expect.objectContaining({ code: 'GW_ERR_STORE_UNAVAILABLE', message: expect.stringContaining('ENOENT') }))
  })
})

describe('driver errors as the gateway tells them', () => {
  it('never passes the server\'s message on, and keeps it as the cause', () => {
    const refused = new pg.DatabaseError('relation "secret_table" does not exist', 0, 'error')
    refused.code = '42P01'
    expect(unavailable(refused)).toMatchObject({ code: 'GW_ERR_STORE_UNAVAILABLE', message: 'the store is unavailable: PostgreSQL rejected a statement (SQLSTATE 42P01)', cause: refused })
    const shutdown = new pg.DatabaseError('terminating connection due to administrator command', 0, 'error')
    shutdown.code = '57P01'
    expect(unavailable(shutdown).message).toBe('the store is unavailable: PostgreSQL is unreachable')
    const full = new pg.DatabaseError('sorry, too many clients already', 0, 'error')
    full.code = '53300'
    expect(unavailable(full).message).toBe('the store is unavailable: PostgreSQL accepts no more connections (max_connections reached)')
    expect(unavailable(Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:5432'), { code: 'ECONNREFUSED' })).message).toBe('the store is unavailable: PostgreSQL is unreachable')
  })
})
