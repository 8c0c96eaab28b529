'use strict';
// prebind for Node.js: run a server on sockets prebind binds first, and read
// back what it published. The model is the pytest plugin (python/): the same
// option names, the same error text.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');

/** Milliseconds to wait for prebind to publish: below the 5 s that Vitest
 * and Jest give a test or hook, so that prebind's reason comes first. */
const DEFAULT_TIMEOUT = 4000;
/** Milliseconds a server has after SIGTERM before prebind kills it. */
const DEFAULT_STOP_TIMEOUT = 3000;
// How long prebind itself may take beyond its --kill-after before it is
// killed too; the bound on every wait after a SIGKILL.
const GRACE = 1000;
const TAIL_LINES = 20;
const MAX_OUTPUT = 1 << 20; // bytes of output kept (the newest)
// Commands that start the server as a child of their own: prebind signals
// the whole group (--group), or the grandchild would outlive the stop.
const WRAPPERS = new Set(['npm', 'npx', 'yarn', 'pnpm', 'sh', 'bash', 'dash']);

class PrebindError extends Error {}
PrebindError.prototype.name = 'PrebindError';

class PrebindNotFound extends PrebindError {}
PrebindNotFound.prototype.name = 'PrebindNotFound';

/** prebind or its server stopped, with the evidence: prebind's exit status,
 * its own error lines and the last lines of output (the pytest plugin's
 * text). */
class Failure extends PrebindError {
  constructor(headline, argv, status, output) {
    super(failureMessage(headline, argv, status, output));
    this.headline = headline;
    this.command = argv;
    this.status = status;
    this.output = output;
  }

  /** prebind's own messages (lines that start with "prebind:"). */
  get errorLines() {
    return errorLines(this.output);
  }
}

class StartError extends Failure {}
StartError.prototype.name = 'StartError';

class ServerExited extends Failure {}
ServerExited.prototype.name = 'ServerExited';

function errorLines(output) {
  return output.split('\n').filter((line) => line.startsWith('prebind:'));
}

function shorten(line, width = 300) {
  return line.length <= width ? line : `${line.slice(0, width)}... (${line.length - width} more characters)`;
}

function failureMessage(headline, argv, status, output) {
  const parts = [headline];
  if (status !== null && status !== undefined) parts.push(`  exit status ${status}: ${describeStatus(status)}`);
  parts.push(`  command: ${shellJoin(argv)}`);
  const errors = errorLines(output);
  if (errors.length) {
    parts.push('  prebind said:');
    for (const line of errors.slice(-5)) parts.push(`    ${shorten(line)}`);
  }
  const tail = output ? output.replace(/\n$/, '').split('\n').slice(-TAIL_LINES) : [];
  if (tail.length) {
    parts.push(`  last ${tail.length} lines of output (prebind's and the server's):`);
    for (const line of tail) parts.push(`    | ${shorten(line)}`);
  } else {
    parts.push('  (no output)');
  }
  return parts.join('\n');
}

function signalName(number) {
  const found = Object.entries(os.constants.signals).find(([, n]) => n === number);
  return found ? found[0] : `signal ${number}`;
}

/** What an exit status of prebind means (prebind(1), EXIT STATUS); a
 * negative status: prebind was killed by that signal. */
function describeStatus(status) {
  if (status < 0) return `prebind was killed by ${signalName(-status)}`;
  if (status === 0) return 'the server exited successfully';
  if (status === 124) return 'not ready in time (or an intercepted port was never claimed)';
  if (status === 125) return 'prebind itself failed (bad usage, bind error, ...)';
  if (status === 126) return 'the command was found but could not be run';
  if (status === 127) return 'the command was not found';
  if (status > 128) return `the server was killed by ${signalName(status - 128)}`;
  return `the server exited with status ${status}`;
}

function shellJoin(argv) {
  return argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)).join(' ');
}

function executable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

function onPath(name) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (dir && executable(path.join(dir, name))) return path.join(dir, name);
  }
  return null;
}

/** The prebind to run: `binary` if given, else $PREBIND (a path, or a name
 * looked up on PATH), else the binary of the platform package
 * (prebind-linux-x64, prebind-linux-arm64), else prebind on PATH. */
function findPrebind(binary) {
  if (process.platform !== 'linux') {
    throw new PrebindNotFound(
      `prebind is Linux-only (socket activation with pidfds and seccomp): no binary for ${process.platform}-${process.arch}; run the tests in a Linux container or VM`,
    );
  }
  const named = binary || process.env.PREBIND;
  if (named) {
    const found = named.includes('/') ? path.resolve(named) : onPath(named);
    if (!found || !executable(found)) {
      throw new PrebindNotFound(`prebind binary '${named}' (from ${binary ? 'binary' : '$PREBIND'}) does not exist or is not executable`);
    }
    return found;
  }
  const pkg = `prebind-linux-${process.arch}`;
  try {
    const file = require.resolve(`${pkg}/bin/prebind`);
    if (executable(file)) return file;
  } catch {
    // not installed: npm skips an optional dependency for another platform
  }
  const found = onPath('prebind');
  if (found) return found;
  throw new PrebindNotFound(
    `no prebind binary: the package ${pkg} is not installed (npm install -D prebind brings it on linux-x64), $PREBIND is not set and prebind is not on PATH`,
  );
}

/** A duration in milliseconds: a number of milliseconds, or prebind's
 * syntax ("500ms", "2s", "1m"); null for "infinity". */
function milliseconds(value, what) {
  if (typeof value === 'number' && value > 0 && Number.isFinite(value)) return value;
  if (value === Infinity || value === 'infinity') return null;
  const m = typeof value === 'string' && /^([0-9]*\.?[0-9]+)(ms|s|m|h|d)?$/.exec(value.trim());
  if (!m || Number(m[1]) <= 0) {
    throw new TypeError(`${what}: ${JSON.stringify(value)} is not a duration (milliseconds, or "500ms", "2s", "1m")`);
  }
  return Number(m[1]) * { ms: 1, s: 1000, m: 60e3, h: 3600e3, d: 86400e3 }[m[2] || 's'];
}

function duration(ms) {
  return ms === null ? 'infinity' : `${Math.max(1, Math.round(ms))}ms`;
}

// One option per item: a single value, a list, or {NAME: value} as NAME=value.
function repeated(flag, value) {
  if (value === undefined || value === null) return [];
  let items;
  if (typeof value === 'string' || typeof value === 'number') items = [value];
  else if (Array.isArray(value)) items = value;
  else items = Object.entries(value).map(([name, v]) => `${name}=${v}`);
  return items.map((item) => `${flag}=${item}`);
}

function readyOptions(ready) {
  if (ready === undefined || ready === null || ready === false) return [];
  if (ready === true) return ['--ready'];
  const known = { log: '--ready-log', http: '--ready-http', exec: '--ready-exec' };
  const argv = [];
  for (const [key, value] of Object.entries(ready)) {
    if (key === 'notify') {
      if (value) argv.push('--ready');
    } else if (!known[key]) {
      throw new TypeError(`ready: unknown condition '${key}' (log, http, exec, notify)`);
    } else if (value === true) {
      argv.push(known[key]);
    } else if (value) {
      argv.push(`${known[key]}=${value}`);
    }
  }
  return argv;
}

/** prebind's arguments for start()'s options, before "--". */
function prebindArguments(command, options, timeout, stopTimeout) {
  const argv = ['--port-fd=3', '--format=json', '--die-with-parent', `--kill-after=${duration(stopTimeout)}`];
  argv.push(...repeated('--listen', options.listen));
  for (const [name, v] of Object.entries(options.setenv || {})) {
    argv.push(v === null || v === undefined ? `--setenv=${name}` : `--setenv=${name}=${v}`);
  }
  if (options.subst) argv.push('--subst');
  const ready = readyOptions(options.ready);
  argv.push(...ready);
  argv.push(...repeated('--intercept', options.intercept));
  if (options.interceptVia) argv.push(`--intercept-via=${options.interceptVia}`);
  // A readiness condition or a port to claim makes prebind wait: its own
  // bound comes first, so that its reason (124) beats ours.
  if ((ready.length || options.intercept !== undefined) && timeout !== null) {
    argv.push(`--ready-timeout=${duration(Math.max(timeout - GRACE, timeout / 2))}`);
  }
  if (options.restart) argv.push(`--restart=${options.restart}`);
  const wrapper = WRAPPERS.has(path.basename(command[0]));
  if (options.group || (options.group === undefined && wrapper)) argv.push('--group');
  if (options.share) argv.push(`--share=${options.share}`);
  if (options.shareLinger !== undefined) argv.push(`--share-linger=${duration(milliseconds(options.shareLinger, 'shareLinger'))}`);
  for (const option of options.options || []) {
    if (/^--(port-fd|format)(=|$)/.test(option)) {
      throw new TypeError(`${option}: start() sets --port-fd and --format=json itself`);
    }
    argv.push(String(option));
  }
  return argv;
}

/** What prebind and the server write, the newest MAX_OUTPUT bytes. */
class Output {
  constructor() {
    this.chunks = [];
    this.size = 0;
  }

  push(chunk) {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size - this.chunks[0].length >= MAX_OUTPUT) this.size -= this.chunks.shift().length;
  }

  text() {
    return Buffer.concat(this.chunks).toString();
  }

  tail(lines = TAIL_LINES) {
    return this.text().replace(/\n$/, '').split('\n').slice(-lines).join('\n');
  }
}

function deadline(ms) {
  let timer;
  const promise = new Promise((resolve) => {
    if (ms !== null) timer = setTimeout(resolve, ms, 'timeout');
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

// `promise`, or 'timeout' after `ms`; the timer goes with the race.
async function within(promise, ms) {
  const wait = deadline(ms);
  try {
    return await Promise.race([promise, wait.promise]);
  } finally {
    wait.cancel();
  }
}

// Resolves on EOF of a stream (an end, an error or a close: whichever first).
function ended(stream) {
  return new Promise((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', resolve);
  });
}

class Server {
  constructor(child, argv, published, output, exit, stopTimeout) {
    const first = published.sockets[0];
    /** Every socket as prebind published it, in fd order. */
    this.sockets = published.sockets;
    /** The first socket's URL: http://127.0.0.1:41234. */
    this.url = first.url;
    /** The first socket's host to connect to (127.0.0.1), or unix path. */
    this.host = first.family === 'unix' ? first.address : hostOf(first.url);
    /** The first socket's port (null for a unix socket). */
    this.port = first.port ?? null;
    /** Every socket's port, in fd order. */
    this.ports = published.sockets.map((s) => s.port ?? null);
    /** The server's pid (the first COMMAND's). */
    this.pid = published.child_pid ?? null;
    /** prebind's pid. */
    this.prebindPid = child.pid;
    /** The prebind command line. */
    this.argv = argv;
    this._child = child;
    this._output = output;
    this._exit = exit;
    this._stopTimeout = stopTimeout;
    this._stopping = null;
  }

  /** What prebind and the server wrote to stdout and stderr so far. */
  output() {
    return this._output.text();
  }

  /** The status once prebind has exited, else null. */
  get exitStatus() {
    return this._exit.status;
  }

  /** Resolves to prebind's exit status once it has exited (the server
   * exited, or was stopped). */
  async wait() {
    this._child.ref(); // the wait keeps the process alive, the server does not
    try {
      await this._exit.done;
      await this._exit.flushed;
    } finally {
      this._child.unref();
    }
    return this._exit.status;
  }

  /** Stop the server (SIGTERM to prebind, which forwards it, SIGKILL after
   * stopTimeout) and resolve to prebind's exit status. Rejects with
   * ServerExited, prebind's messages and the output, if the server had
   * exited before it was stopped. Bounded; safe to call twice. */
  stop() {
    if (!this._stopping) this._stopping = this._stop();
    return this._stopping;
  }

  async _stop() {
    // Exited, or a zombie whose exit Node has not heard of yet: a failed
    // exec (127) or a crash just before stop() is not a stop.
    if (this._exit.status !== null || zombie(this._child.pid)) {
      await within(this._exit.flushed, GRACE);
      throw new ServerExited('the server exited before it was stopped', this.argv, this._exit.status, this._output.tail());
    }
    this._child.kill('SIGTERM');
    if ((await within(this._exit.done, this._stopTimeout + GRACE)) === 'timeout') {
      this._child.kill('SIGKILL'); // the server goes with it (its death signal)
      await within(this._exit.done, GRACE);
    }
    await this._exit.flushed;
    return this._exit.status;
  }

  [Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose')]() {
    return this.stop();
  }
}

function zombie(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
  } catch {
    return false;
  }
}

function hostOf(url) {
  const host = url.split('://').pop().replace(/:[0-9]+$/, '');
  return host.startsWith('[') ? host.slice(1, -1) : host;
}

function checkCommand(command) {
  if (typeof command === 'string') throw new TypeError("command is a list of arguments, not a string: ['node', 'server.js']");
  if (!Array.isArray(command) || command.length === 0) throw new TypeError('command is an empty list');
}

// A runner's worker outlives a kill -9 of its runner (Jest's and node
// --test's until their tests end), and with it prebind, whose parent it
// is: in a worker, the servers stop when the worker's parent changes.
const RUNNER_WORKER = ['JEST_WORKER_ID', 'NODE_TEST_CONTEXT', 'VITEST_WORKER_ID', 'TEST_WORKER_INDEX'];
const running = new Set(); // the prebinds of this process that run
let orphanWatch = null;

function parentPid() {
  const stat = fs.readFileSync('/proc/self/stat', 'utf8'); // not process.ppid: Jest's sandbox copies it
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

function orphanGuard(child, exit) {
  if (!RUNNER_WORKER.some((name) => process.env[name])) return;
  running.add(child);
  exit.done.then(() => running.delete(child));
  if (orphanWatch) return;
  const parent = parentPid();
  // No event says that a parent died; a poll of getppid(2) does, unref'd.
  orphanWatch = setInterval(() => {
    if (parentPid() === parent) return;
    for (const prebind of running) prebind.kill('SIGTERM');
    clearInterval(orphanWatch);
  }, 250);
  orphanWatch.unref();
}

/** Start `command` under prebind and resolve, once prebind has published,
 * to a Server; reject with StartError (prebind's message, the exit status
 * and the last lines of output) if it exits first or publishes nothing
 * within `timeout`. */
async function start(command, options = {}) {
  checkCommand(command);
  const timeout = milliseconds(options.timeout ?? DEFAULT_TIMEOUT, 'timeout');
  const stopTimeout = milliseconds(options.stopTimeout ?? DEFAULT_STOP_TIMEOUT, 'stopTimeout');
  const bin = findPrebind(options.binary);
  const argv = [bin, ...prebindArguments(command, options, timeout, stopTimeout), '--', ...command.map(String)];
  const env = { ...process.env };
  for (const [name, value] of Object.entries(options.env || {})) {
    if (value === undefined || value === null) delete env[name];
    else env[name] = String(value);
  }
  // fd 3 is the port fd: prebind writes its JSON there and closes it (the
  // server's socket then takes fd 3 in the server only).
  const child = spawn(bin, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe', 'pipe'], cwd: options.cwd, env });
  const output = new Output();
  const exit = { status: null };
  const streamsEnd = Promise.all([ended(child.stdout), ended(child.stderr)]);
  exit.done = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      exit.status = code ?? -os.constants.signals[signal];
      resolve('exit');
    });
    child.once('error', (e) => {
      output.push(Buffer.from(`prebind: cannot run ${bin}: ${e.message}\n`));
      exit.status = 125;
      resolve('exit');
    });
  });
  // The rest of the output once prebind has exited: bounded, as a server
  // that outlived prebind may hold the pipes open.
  exit.flushed = exit.done.then(() => within(streamsEnd, 200));
  child.stdout.on('data', (d) => output.push(d));
  child.stderr.on('data', (d) => output.push(d));
  let json = '';
  child.stdio[3].setEncoding('utf8').on('data', (d) => (json += d));

  const fail = async (headline, ourStop) => {
    if (exit.status === null) {
      child.kill(ourStop ? 'SIGTERM' : 'SIGKILL');
      if ((await within(exit.done, GRACE)) === 'timeout') child.kill('SIGKILL');
      await within(exit.done, GRACE);
    }
    await within(exit.flushed, GRACE);
    // After our own SIGTERM the status says nothing about the failure.
    throw new StartError(headline, argv, ourStop ? null : exit.status, output.tail());
  };

  const portFdEnd = ended(child.stdio[3]);
  const first = await within(Promise.race([portFdEnd, exit.done]), timeout);
  if (first === 'timeout') return fail(`prebind published nothing within ${timeout} ms`, true);
  // prebind's exit may come before the last of fd 3: read to its end.
  await within(portFdEnd, GRACE);
  if (!json) {
    await within(exit.done, GRACE);
    return fail('prebind exited without publishing: the server did not start', false);
  }
  let published;
  try {
    published = JSON.parse(json);
    if (!Array.isArray(published.sockets) || !published.sockets.length) throw new Error('no sockets');
  } catch (e) {
    return fail(`prebind published something that is not its JSON (${e.message}): ${json.slice(0, 200)}`, true);
  }
  if (exit.status !== null) return fail('the server exited right after prebind published', false);
  // Nothing here keeps the runner alive: a server never stopped ends with
  // the runner (--die-with-parent).
  child.unref();
  orphanGuard(child, exit);
  for (const stream of [child.stdout, child.stderr, child.stdio[3]]) stream.unref?.();
  return new Server(child, argv, published, output, exit, stopTimeout);
}

/** The listen() target of a server that runs both ways: {fd: 3} when
 * prebind passed it its socket (LISTEN_FDS, LISTEN_PID this process), else
 * `port`: app.listen(listenTarget(3000)). */
function listenTarget(port, env = process.env) {
  if (Number(env.LISTEN_FDS) >= 1 && Number(env.LISTEN_PID) === process.pid) return { fd: 3 };
  return port;
}

module.exports = {
  start,
  listenTarget,
  findPrebind,
  describeStatus,
  prebindArguments,
  milliseconds,
  Server,
  PrebindError,
  PrebindNotFound,
  StartError,
  ServerExited,
  DEFAULT_TIMEOUT,
  DEFAULT_STOP_TIMEOUT,
  WRAPPERS,
};
