// The store contract suites on PostgreSQL: a file of its own, so that the backends run side by side in the suite's
// workers (a file runs in one worker, its tests one after another).
import { afterAll } from 'vitest'
import { dropEmptiedSchemas, isolatedPostgresStore, sharedPostgresStores } from '../helpers/postgres.ts'
import { sessionStoreContract } from './session-store.contract.ts'
import { taskStoreContract } from './task-store.contract.ts'
import { taskInputStoreContract } from './task-input-store.contract.ts'
import { ownershipContract } from './ownership.contract.ts'
import { homeStoreContract } from './home-store.contract.ts'
import { taskLimitContract } from './task-limit.contract.ts'
import { taskQueryContract } from './task-query.contract.ts'
import { taskTimelineContract } from './task-timeline.contract.ts'
import { storedBytesContract } from './stored-bytes.contract.ts'
import { rateLimitStoreContract } from './rate-limit-store.contract.ts'

// A closed store's schema is emptied and opened again by a later test (see sharedPostgresStores); dropped here.
afterAll(dropEmptiedSchemas)

sessionStoreContract('postgres', isolatedPostgresStore)
taskStoreContract('postgres', isolatedPostgresStore)
taskInputStoreContract('postgres', isolatedPostgresStore)
ownershipContract('postgres', isolatedPostgresStore)
homeStoreContract('postgres', isolatedPostgresStore)
taskLimitContract('postgres, two processes', async () => await sharedPostgresStores(2))
taskQueryContract('postgres', isolatedPostgresStore)
taskTimelineContract('postgres', isolatedPostgresStore)
storedBytesContract('postgres, two processes', async () => await sharedPostgresStores(2))
rateLimitStoreContract({ postgres: isolatedPostgresStore })
