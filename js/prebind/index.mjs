// The ESM entry point: the same module as index.cjs (one implementation,
// one set of error classes for import and require alike).
import prebind from './index.cjs';

export const {
  start,
  listenTarget,
  findPrebind,
  describeStatus,
  Server,
  PrebindError,
  PrebindNotFound,
  StartError,
  ServerExited,
  DEFAULT_TIMEOUT,
  DEFAULT_STOP_TIMEOUT,
} = prebind;
export default prebind;
