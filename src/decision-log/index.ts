/** OPA-style decision logs: the event shape, masking, and the file / HTTP sinks behind bounded buffers. */
export { openDecisionLog, noDecisionLog, type DecisionLog, type DecisionLogOptions } from './decision-log.js';
export { maskEvent, type DecisionLogEvent, type DecisionRecord } from './event.js';
export type { SinkStats } from './batching-sink.js';
