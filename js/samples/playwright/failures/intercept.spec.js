import { test as base, expect } from '@playwright/test';
import { prebindTest } from 'prebind/playwright';

const test = prebindTest(base, ['node', 'server.js'], { env: { PORT: '3001' }, intercept: 3000 });
test('a wrong --intercept port', async ({ request }) => {
  expect((await request.get('/')).ok()).toBe(true);
});
