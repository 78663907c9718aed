import type { StoreConfig } from '../config/schema.ts'
import { backupSqliteFile, type SqliteBackup } from './sqlite/sqlite-backup.ts'

/** Where the recipes for the stores the command does not copy itself are. */
const RECIPES = 'docs/operations.md#backup-and-restore'

/**
 * Takes an online backup of the store `config` names into the new file `target`, or throws why it cannot: only a
 * SQLite store is a file this process can copy consistently; a Redis store is backed up by Redis itself (BGSAVE),
 * a PostgreSQL one with pg_dump, and a memory store holds nothing that outlives its process.
 */
export function backupStore (config: StoreConfig, target: string): SqliteBackup {
  switch (config.kind) {
    case 'sqlite':
      return backupSqliteFile(config.path, target)
    case 'memory':
      throw new Error('store.kind is memory: nothing outlives the gateway process, so there is nothing to back up')
    case 'redis':
      throw new Error(`store.kind is redis: back it up with Redis itself (BGSAVE, then copy its dump.rdb; see ${RECIPES})`)
    case 'postgres':
      throw new Error(`store.kind is postgres: back it up with PostgreSQL's own tools while the gateway runs (pg_dump --schema=${config.schema}; see ${RECIPES})`)
  }
}
