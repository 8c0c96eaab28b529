module.exports = async function globalTeardown() {
  await Promise.all(globalThis.servers.map((server) => server.stop()));
};
