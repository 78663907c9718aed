import type Database from 'better-sqlite3'

/** Ordered migrations; `user_version` records how many have run. Never edit a released step. */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE sessions (
     id TEXT PRIMARY KEY,
     principal TEXT NOT NULL,
     protocol_version TEXT NOT NULL,
     client_capabilities TEXT NOT NULL,
     client_info TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     last_seen_at INTEGER NOT NULL
   );
   CREATE INDEX sessions_last_seen ON sessions (last_seen_at);`,
]

export const SCHEMA_VERSION = MIGRATIONS.length

export function migrate (db: Database.Database): void {
  const current = db.pragma('user_version', { simple: true }) as number
  if (current > SCHEMA_VERSION) {
    throw new Error(`database schema version ${current} is newer than this gateway's ${SCHEMA_VERSION}; upgrade the gateway`)
  }
  for (let version = current; version < SCHEMA_VERSION; version++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[version]!)
      db.pragma(`user_version = ${version + 1}`)
    })()
  }
}
