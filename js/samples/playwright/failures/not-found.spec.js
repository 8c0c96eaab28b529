import { test as base, expect } from '@playwright/test';
import { prebindTest } from 'prebind/playwright';

const test = prebindTest(base, ['nodee', 'server.js']);
test('a mistyped command', async ({ request }) => {
  expect((await request.get('/')).ok()).toBe(true);
});
