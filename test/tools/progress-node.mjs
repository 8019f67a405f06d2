// The node:test side of progress.cjs (node:test loads a reporter as a module's default export).
import progress from './progress.cjs';

export default progress.nodeTest;
