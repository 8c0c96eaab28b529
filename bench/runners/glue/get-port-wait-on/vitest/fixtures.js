import { test as base } from 'vitest';
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
});
