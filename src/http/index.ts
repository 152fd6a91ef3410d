export { buildApp, type AppOptions } from './app.js';
export { sendProblem, problemOf, type Problem } from './problem.js';
