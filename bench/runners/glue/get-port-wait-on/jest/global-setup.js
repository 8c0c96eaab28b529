const { startServer } = require('./start-server.js');

// One server per worker and one for the run: the workers are separate
// processes, so their URLs go through the environment they inherit.
module.exports = async function globalSetup(config) {
  globalThis.servers = [];
  for (let id = 1; id <= config.maxWorkers; id++) {
    const server = await startServer(['node', 'server.js']);
    globalThis.servers.push(server);
    process.env[`SERVER_URL_${id}`] = server.url;
  }
  const shared = await startServer(['node', 'server.js']);
  globalThis.servers.push(shared);
  process.env.SHARED_URL = shared.url;
};
