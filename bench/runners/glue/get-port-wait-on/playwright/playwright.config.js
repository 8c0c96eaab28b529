import getPort from 'get-port';
// The workers load this file again: the port is chosen once, in the runner.
process.env.SHARED_PORT ??= String(await getPort());
  webServer: {
    command: 'node server.js',
    url: `http://127.0.0.1:${process.env.SHARED_PORT}`,
    env: { PORT: process.env.SHARED_PORT },
  },
  use: { baseURL: `http://127.0.0.1:${process.env.SHARED_PORT}` },
