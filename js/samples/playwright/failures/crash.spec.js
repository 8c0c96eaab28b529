import { test as base, expect } from '@playwright/test';
import { prebindTest } from 'prebind/playwright';

const test = prebindTest(base, ['node', 'server.js'], { env: { CRASH: '1' }, ready: { http: '/' } });
test('a server that crashes at start', async ({ request }) => {
  expect((await request.get('/')).ok()).toBe(true);
});
