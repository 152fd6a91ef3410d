export { loadConfig, checkDecisionLogConfig, DEFAULT_PRIORITIES, type WritConfig, type DecisionLogConfig } from './config.js';
