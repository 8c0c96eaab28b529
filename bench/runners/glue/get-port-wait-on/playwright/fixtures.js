import { test as base } from '@playwright/test';
import { startServer } from '../start-server.js';

export const test = base.extend({
  server: [
    async ({}, use) => {
      const server = await startServer(['node', 'server.js']);
      await use(server);
      await server.stop();
    },
    { scope: 'worker' },
  ],
  baseURL: async ({ server }, use) => use(server.url),
});
