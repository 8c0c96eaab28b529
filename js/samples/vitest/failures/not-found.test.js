import { test as base, expect } from 'vitest';
import { prebindTest } from 'prebind/vitest';

const test = prebindTest(base, ['nodee', 'server.js']);
test('a mistyped command', async ({ server }) => {
  expect((await fetch(server.url)).ok).toBe(true);
});
