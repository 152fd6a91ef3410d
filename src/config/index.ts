export { loadConfig, checkDecisionLogConfig, maskDatabaseUrl, DEFAULT_PRIORITIES, type WritConfig, type DecisionLogConfig } from './config.js';
