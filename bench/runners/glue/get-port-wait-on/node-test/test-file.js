import { before, after } from 'node:test';
import { startServer } from '../start-server.js';
let server;
before(async () => {
  server = await startServer(['node', 'server.js']);
});
after(() => server.stop());
const shared = { url: process.env.SHARED_URL };
