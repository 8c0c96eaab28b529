'use strict';
// node --test server.test.js   (PREBIND=/path/to/prebind, or prebind on PATH)
//
// Starts server.js through prebind and talks to it. The address comes from a
// pipe given with --port-fd: the server never sees it, so the read ends as
// soon as prebind has published, and nothing of the server's output mixes
// in. Works with node:test on node 18 (Debian 12) and later.

const test = require('node:test');
const assert = require('node:assert');
const { spawn, execFileSync } = require('node:child_process');
const http = require('node:http');
const path = require('node:path');

const TIMEOUT_MS = 20000; // the bound on every wait
const SERVER = path.join(__dirname, 'server.js');

function prebindPath() {
  if (process.env.PREBIND) return process.env.PREBIND;
  try {
    return execFileSync('sh', ['-c', 'command -v prebind'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('prebind not found: set PREBIND or put prebind on PATH');
  }
}

function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Run `command` through prebind; resolves to {url, childPid, stop()} once the
// socket listens. stop() sends SIGTERM (prebind forwards it) and resolves to
// prebind's exit status, the server's own; exited() only waits for it.
async function startServer(command, prebindArgs = []) {
  const child = spawn(prebindPath(),
    ['--port-fd=3', '--format=json', '--die-with-parent', ...prebindArgs, '--', ...command],
    // fd 3 of prebind is a pipe to us. The server's stdout goes to our
    // stderr: node --test reads the test's stdout as its report.
    { stdio: ['ignore', process.stderr, 'inherit', 'pipe'] });
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve(code !== null ? code : `signal ${signal}`));
  });
  const published = new Promise((resolve, reject) => {
    let data = '';
    child.stdio[3].setEncoding('utf8');
    child.stdio[3].on('data', (chunk) => { data += chunk; });
    child.stdio[3].on('end', () => resolve(data));
    child.stdio[3].on('error', reject);
    child.on('error', reject);
  });
  let text;
  try {
    text = await withTimeout(published, 'prebind --port-fd');
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  if (!text) {
    throw new Error(`prebind exited ${await withTimeout(exited, 'prebind')} without publishing`);
  }
  const info = JSON.parse(text);
  return {
    url: info.sockets[0].url,
    childPid: info.child_pid,
    sockets: info.sockets,
    exited: () => withTimeout(exited, 'waiting for the server to exit'),
    stop: () => {
      child.kill('SIGTERM');
      return withTimeout(exited, 'stopping the server');
    },
  };
}

function get(url) {
  return withTimeout(new Promise((resolve, reject) => {
    // agent: false, one connection per request: no keep-alive left over.
    http.get(url, { agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { body += chunk; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    }).on('error', reject);
  }), `GET ${url}`);
}

test('server.js answers through prebind', async () => {
  const server = await startServer([process.execPath, SERVER]);
  try {
    // No waiting loop: the socket listens already, the kernel queues us.
    const { status, body } = await get(`${server.url}/hello`);
    assert.strictEqual(status, 200);
    assert.strictEqual(body, `node pid=${server.childPid} path=/hello\n`);
  } finally {
    assert.strictEqual(await server.stop(), 0);
  }
});

test('many servers at once get distinct ports', async () => {
  const servers = await Promise.all(
    Array.from({ length: 6 }, () => startServer([process.execPath, SERVER])));
  try {
    assert.strictEqual(new Set(servers.map((s) => s.url)).size, servers.length);
    for (const s of servers) {
      assert.strictEqual((await get(s.url)).body, `node pid=${s.childPid} path=/\n`);
    }
  } finally {
    const statuses = await Promise.all(servers.map((s) => s.stop()));
    assert.deepStrictEqual(statuses, servers.map(() => 0));
  }
});

test('a named socket', async () => {
  const server = await startServer([process.execPath, SERVER], ['-l', 'web=0']);
  try {
    assert.strictEqual(server.sockets[0].name, 'web');
    assert.strictEqual((await get(server.url)).status, 200);
  } finally {
    assert.strictEqual(await server.stop(), 0);
  }
});

test('a wrapper without exec breaks LISTEN_PID', async () => {
  // As `npm run start` would: the server is a grandchild of prebind.
  const server = await startServer(['sh', '-c', `"${process.execPath}" "${SERVER}"; exit $?`]);
  assert.strictEqual(await server.exited(), 1); // the server refused the socket
});
