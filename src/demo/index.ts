/** `writ demo`: the stories Writ exists for, played by real agents over HTTP against a throw-away Writ. */
export { openStage, type Stage } from './stage.js';
export { playStories, type StoryResult } from './stories.js';
