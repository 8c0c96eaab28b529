import { test as base, expect } from 'vitest';
import { prebindTest } from 'prebind/vitest';

const test = prebindTest(base, ['node', 'server.js'], { env: { CRASH: '1' }, ready: { http: '/' } });
test('a server that crashes at start', async ({ server }) => {
  expect((await fetch(server.url)).ok).toBe(true);
});
