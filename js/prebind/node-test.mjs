import nodeTest from './node-test.cjs';

export const { usePrebind } = nodeTest;
