// bench/runners/driver.mjs N PREBIND_JS NODE_MODULES: start → first answer
// of server.js, N rounds; each round runs every way once, in a rotating
// order, in this one process and one timer (performance.now()), so a slow
// phase of the machine lands on all of them. Stopping is not timed. One
// JSON line per sample on stdout: {"way": ..., "ms": ...}.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const [n, prebindJs, modules] = [Number(process.argv[2]), process.argv[3], process.argv[4]];
const { start } = await import(pathToFileURL(prebindJs).href);
const getPort = (await import(pathToFileURL(path.join(modules, 'get-port/index.js')).href)).default;
const waitOn = createRequire(path.join(modules, 'x.js'))('wait-on');
const server = path.join(path.dirname(fileURLToPath(import.meta.url)), 'server.js');

async function answer(url) {
  const res = await fetch(url);
  if ((await res.text()) !== 'hello\n') throw new Error(`${url}: not the server's answer`);
}

// What a user writes without prebind: a free port, the server on it, and
// wait-on polling it (every `interval` ms) until it answers.
function byHand(interval) {
  return async () => {
    const port = await getPort();
    const child = spawn(process.execPath, [server], { env: { ...process.env, PORT: String(port) }, stdio: 'ignore' });
    const url = `http://127.0.0.1:${port}/`;
    await waitOn({ resources: [`http-get://127.0.0.1:${port}/`], timeout: 10000, ...(interval && { interval }) });
    await answer(url);
    return async () => {
      child.kill('SIGTERM');
      if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
    };
  };
}

let urlMs; // prebind's start() resolves with the URL before the server runs
async function withPrebind() {
  const t0 = performance.now();
  const srv = await start([process.execPath, server]);
  urlMs = performance.now() - t0;
  await answer(srv.url);
  return () => srv.stop().catch(() => {}); // 143 after SIGTERM is a stop
}

const ways = [
  ['prebind start()', withPrebind],
  ['get-port + spawn + wait-on (interval 250 ms, its default)', byHand(0)],
  ['get-port + spawn + wait-on (interval 10 ms)', byHand(10)],
];
for (let i = 0; i < n; i++) {
  const order = ways.slice(i % ways.length).concat(ways.slice(0, i % ways.length));
  for (const [way, fn] of order) {
    const t0 = performance.now();
    const stop = await fn();
    const ms = performance.now() - t0;
    await stop();
    process.stdout.write(JSON.stringify({ way, ms, round: i, ...(fn === withPrebind && { urlMs }) }) + '\n');
  }
}
