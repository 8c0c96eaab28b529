import { test as base, expect } from 'vitest';
import { prebindTest } from 'prebind/vitest';

// The server binds 3001: prebind waits for 3000 and says so.
const test = prebindTest(base, ['node', 'server.js'], { env: { PORT: '3001' }, intercept: 3000 });
test('a wrong --intercept port', async ({ server }) => {
  expect((await fetch(server.url)).ok).toBe(true);
});
