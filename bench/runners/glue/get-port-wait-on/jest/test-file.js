const { startServer } = require('../start-server.js');
let server;
beforeAll(async () => {
  server = await startServer(['node', 'server.js']);
});
afterAll(() => server.stop());
const worker = { url: process.env[`SERVER_URL_${process.env.JEST_WORKER_ID}`] };
const shared = { url: process.env.SHARED_URL };
