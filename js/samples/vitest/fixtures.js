import { test as base } from 'vitest';
import { prebindTest } from 'prebind/vitest';

// One server per worker: test('...', async ({ server }) => fetch(server.url)).
export const test = prebindTest(base, ['node', 'server.js']);
