import { defineConfig } from '@playwright/test';
import { prebindWebServer } from 'prebind/playwright';

export default defineConfig({
  testDir: 'tests',
  workers: 4,
  fullyParallel: true,
  // One server for the run: prebind prints its URL first, the workers read
  // it from process.env.PREBIND_URL.
  webServer: prebindWebServer({ command: ['node', 'server.js'] }),
  use: { baseURL: process.env.PREBIND_URL },
});
