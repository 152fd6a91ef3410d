export { loadConfig, DEFAULT_PRIORITIES, type WritConfig } from './config.js';
