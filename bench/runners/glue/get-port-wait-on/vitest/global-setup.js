import { startServer } from '../start-server.js';

export default async function setup({ provide }) {
  const server = await startServer(['node', 'server.js']);
  provide('server', { url: server.url, port: server.port, pid: server.pid });
  return () => server.stop();
}
