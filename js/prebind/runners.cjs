'use strict';
// The test-runner helpers: fixtures for Vitest and Playwright (the same
// [function, options] shape serves both, and neither runner is imported
// here), hooks for Jest and Vitest's globals, Playwright's webServer.

const prebind = require('./index.cjs');

// A teardown may take prebind's own --kill-after, then our grace: 3 s more.
function fixtureTimeout(options) {
  const start = prebind.milliseconds(options.timeout ?? prebind.DEFAULT_TIMEOUT, 'timeout');
  const stop = prebind.milliseconds(options.stopTimeout ?? prebind.DEFAULT_STOP_TIMEOUT, 'stopTimeout');
  return start === null ? 0 : start + stop + 3000;
}

/** A worker-scoped fixture: one server per worker, started before the
 * worker's first test that uses it, stopped when the worker ends (its
 * teardown fails with ServerExited if the server had died).
 * `test.extend({ server: prebindFixture(['node', 'server.js']) })`. */
function prebindFixture(command, options = {}) {
  // The runners read the fixtures a function uses from its first
  // parameter, which must be a destructuring pattern: `{}`, none.
  // eslint-disable-next-line no-empty-pattern
  const fixture = async ({}, use) => {
    const server = await prebind.start(command, options);
    try {
      await use(server);
    } finally {
      await server.stop();
    }
  };
  return [fixture, { scope: 'worker', timeout: fixtureTimeout(options) }];
}

/** `base.extend()` with a worker-scoped `server` fixture (and, for
 * Playwright, `baseURL` set to its URL):
 * `export const test = prebindTest(base, ['node', 'server.js'])`. */
function prebindTest(base, command, options = {}) {
  const fixtures = { server: prebindFixture(command, options) };
  if (options.baseURL !== false) {
    // Playwright's own option; a Vitest test just gets one more fixture.
    fixtures.baseURL = async ({ server }, use) => use(server.url);
  }
  return base.extend(fixtures);
}

/** A stand-in for a Server that exists only between beforeAll and
 * afterAll: reading it outside says so instead of giving undefined. */
function lateServer(get) {
  return new Proxy(
    {},
    {
      get(_, key) {
        const server = get();
        if (!server) {
          if (key === 'then') return undefined; // not a promise
          throw new prebind.PrebindError(`the server is not started: read server.${String(key)} in a test, not at the top of the file`);
        }
        const value = server[key];
        return typeof value === 'function' ? value.bind(server) : value;
      },
    },
  );
}

/** One server for the tests of this file (of this describe block): started
 * by a beforeAll hook, stopped by an afterAll hook, each bounded by its own
 * timeout, so that a failure reads as prebind's reason, never as the
 * runner's "timed out". Hooks: the runner's globals (Jest; Vitest with
 * globals: true), or { beforeAll, afterAll } given in `hooks`. */
function usePrebind(command, options = {}, hooks = globalThis) {
  let server = null;
  const timeout = fixtureTimeout(options) || 2 ** 31 - 1;
  hooks.beforeAll(async () => {
    server = await prebind.start(command, options);
  }, timeout);
  hooks.afterAll(async () => {
    const started = server;
    server = null;
    if (started) await started.stop();
  }, timeout);
  return lateServer(() => server);
}

/** Vitest's globalSetup: one server for the whole run, its {url, host,
 * port, ports, pid} given to the tests by provide(key) (read with
 * inject(key)). `export default prebindGlobalSetup(['node', 'server.js'])`. */
function prebindGlobalSetup(command, options = {}, key = 'prebind') {
  return async ({ provide }) => {
    const server = await prebind.start(command, options);
    const { url, host, port, ports, pid } = server;
    provide(key, { url, host, port, ports, pid });
    return () => server.stop();
  };
}

function workerVariable(name, what, id) {
  return `${envName(name).toUpperCase()}_${what}_${id}`;
}

/** Jest's globalSetup: one server per worker, all started before the
 * workers (which inherit their addresses in the environment); a test reads
 * its worker's with workerServer(). globalTeardown: stopPrebindWorkers(). */
function prebindWorkers(command, options = {}, name = 'prebind') {
  return async (globalConfig) => {
    const count = Math.max(1, globalConfig.maxWorkers || 1);
    const servers = await Promise.all(Array.from({ length: count }, () => prebind.start(command, options)));
    servers.forEach((server, i) => {
      process.env[workerVariable(name, 'URL', i + 1)] = server.url;
      process.env[workerVariable(name, 'PID', i + 1)] = String(server.pid);
    });
    // globalSetup and globalTeardown share the main process's globals.
    globalThis[Symbol.for(`prebind.workers.${name}`)] = servers;
  };
}

function stopPrebindWorkers(name = 'prebind') {
  return async () => {
    const servers = globalThis[Symbol.for(`prebind.workers.${name}`)] || [];
    await Promise.all(servers.map((server) => server.stop()));
  };
}

/** This Jest worker's server of prebindWorkers(): {url, host, port, pid}. */
function workerServer(name = 'prebind') {
  const id = process.env.JEST_WORKER_ID || '1';
  const url = process.env[workerVariable(name, 'URL', id)];
  if (!url) {
    throw new prebind.PrebindError(`no server for Jest worker ${id}: globalSetup must export prebindWorkers(command), globalTeardown stopPrebindWorkers()`);
  }
  const { hostname, port } = new URL(url);
  return { url, host: hostname, port: Number(port), pid: Number(process.env[workerVariable(name, 'PID', id)]) };
}

function envName(name) {
  return name.toLowerCase().replace(/[^a-z0-9_]/g, '_');
}

function shellQuote(arg) {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${String(arg).replace(/'/g, "'\\''")}'`;
}

/** Playwright's webServer entry for COMMAND under prebind: `exec prebind
 * --print=url ...` (prebind, not a shell, is the process Playwright stops),
 * and a wait.stdout anchored to prebind's first line, which stores the URL
 * and port in process.env.PREBIND_URL and PREBIND_PORT (NAME_URL with
 * `name`), read by the workers: `use: { baseURL: process.env.PREBIND_URL }`. */
function prebindWebServer({ command, name = 'prebind', ...options }) {
  prebind.findPrebind(options.binary); // fails here, in one line, where there is none
  const timeout = prebind.milliseconds(options.timeout ?? 30000, 'timeout');
  const stopTimeout = prebind.milliseconds(options.stopTimeout ?? prebind.DEFAULT_STOP_TIMEOUT, 'stopTimeout');
  const argv = prebind
    .prebindArguments(command, options, timeout, stopTimeout)
    .filter((a) => !/^--(port-fd|format)=/.test(a));
  const env = envName(name);
  const line = `${[prebind.findPrebind(options.binary), '--print=url', ...argv, '--', ...command].map(shellQuote).join(' ')}`;
  return {
    command: `exec ${line}`,
    // prebind prints its URL before COMMAND can write anything: the
    // anchored ^ matches that line only, never a server's log line.
    wait: { stdout: new RegExp(`^(?<${env}_url>[a-z]+://[^\\s]*:(?<${env}_port>[0-9]+))\\n`) },
    timeout: timeout ?? 0,
    gracefulShutdown: { signal: 'SIGTERM', timeout: stopTimeout + 1000 },
    stdout: 'pipe',
    stderr: 'pipe',
    cwd: options.cwd,
    env: options.env,
    name,
  };
}

module.exports = {
  prebindFixture,
  prebindTest,
  usePrebind,
  prebindGlobalSetup,
  prebindWorkers,
  stopPrebindWorkers,
  workerServer,
  prebindWebServer,
  lateServer,
};
