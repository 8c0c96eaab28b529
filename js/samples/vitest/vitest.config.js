import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['tests/*.test.js'],
    maxWorkers: 4,
    minWorkers: 4,
    // One server for the whole run, given to the tests by inject('prebind').
    globalSetup: ['./global-setup.js'],
  },
});
