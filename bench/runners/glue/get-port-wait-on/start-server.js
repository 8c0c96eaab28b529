// A server on a free port, once it answers; stop() ends it.
const { spawn } = require('node:child_process');
const { once } = require('node:events');
const waitOn = require('wait-on');

async function startServer(command, options = {}) {
  const { default: getPort } = await import('get-port');
  const port = await getPort();
  const child = spawn(command[0], command.slice(1), {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`${command.join(' ')} exited with ${code} before it answered`);
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await Promise.race([waitOn({ resources: [`http-get://127.0.0.1:${port}/`], timeout: options.timeout ?? 4000 }), exited]);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  exited.catch(() => {});
  return {
    url,
    port,
    pid: child.pid,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

module.exports = { startServer };
