/** The PostgreSQL engine of the datastore contract (src/store/contract.ts): several Writ replicas on one database. */
export { openPostgresStore, postgresHoldsGraph, postgresHoldsStore, type PostgresStore, type PostgresStoreOptions } from './postgres-store.js';
export { migratePostgres, type MigrationReport } from './migrate.js';
export { POSTGRES_MIGRATIONS } from './migrations/index.js';
export { GRAPH_CHANNEL } from './graph-event-store.js';
export { listenForGraphHeads, type GraphHeadListener, type GraphHeadListenerOptions } from './graph-notifications.js';
export type { PostgresStoreStats } from './session.js';
