export { loadConfig, checkDecisionLogConfig, withoutPassword, DEFAULT_PRIORITIES, type WritConfig, type DecisionLogConfig } from './config.js';
