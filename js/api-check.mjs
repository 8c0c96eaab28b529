// node api-check.mjs, in a project where the tarballs are installed (js/test
// runs it): what the runner samples do not show. The binary's lookup and
// its errors, ESM and CJS alike, output(), asyncDispose, stop() of a dead
// server, a server started from a worker thread, listenTarget.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import * as prebind from 'prebind';

const require = createRequire(import.meta.url);
const cjs = require('prebind');
const server = ['node', '-e', "require('node:http').createServer((q, s) => s.end('hi')).listen({ fd: 3 }); console.log('up')"];

// One implementation behind both entry points: the same classes.
assert.equal(cjs.start, prebind.start);
assert.equal(cjs.StartError, prebind.StartError);
for (const file of ['index.d.ts', 'runners.d.ts', 'node-test.d.ts']) {
  assert.ok(fs.existsSync(path.join(path.dirname(require.resolve('prebind')), file)), file);
}

// The binary: the platform package's by default; PREBIND overrides it.
assert.match(prebind.findPrebind(), /node_modules\/prebind-linux-x64\/bin\/prebind$/);
process.env.PREBIND = '/nonexistent/prebind';
await assert.rejects(prebind.start(server), (e) => e instanceof prebind.PrebindNotFound && /'\/nonexistent\/prebind' \(from \$PREBIND\)/.test(e.message));
delete process.env.PREBIND;
// Elsewhere than Linux: one line, whatever else is set.
const check = (platform) =>
  execFileSync('node', ['-e', `Object.defineProperty(process, 'platform', { value: '${platform}' });
    try { require('prebind').findPrebind(); } catch (e) { console.log(e.name + ': ' + e.message); }`]).toString();
for (const platform of ['darwin', 'win32']) {
  const said = check(platform);
  assert.match(said, /^PrebindNotFound: prebind is Linux-only/);
  assert.equal(said.trim().split('\n').length, 1, said);
}

// A server: its URL answers at once, its output is kept, stop() gives
// prebind's status (the server's, killed by SIGTERM: 143).
const srv = await prebind.start(server, { ready: { log: 'up' } });
assert.equal(srv.url, `http://127.0.0.1:${srv.port}`);
assert.deepEqual(srv.ports, [srv.port]);
assert.equal(await (await fetch(srv.url)).text(), 'hi');
assert.match(srv.output(), /^up$/m);
assert.equal(typeof srv[Symbol.asyncDispose], 'function');
assert.equal(await srv[Symbol.asyncDispose](), 143);
assert.equal(await srv.stop(), 143); // twice: the same answer

// stop() of a server that died: rejects with its status and output.
const dies = await prebind.start(['sh', '-c', 'echo bye; exit 7'], { group: false });
assert.equal(await dies.wait(), 7);
await assert.rejects(dies.stop(), (e) => e instanceof prebind.ServerExited && e.status === 7 && /\| bye/.test(e.message));

// From a worker thread, where a stdio stream option would throw.
const worker = new Worker(
  `const { start } = require('prebind');
   const { parentPort } = require('node:worker_threads');
   start(${JSON.stringify(server)}).then(async (s) => {
     const answer = await (await fetch(s.url)).text();
     parentPort.postMessage([answer, await s.stop()]);
   }, (e) => parentPort.postMessage([e.message]));`,
  { eval: true },
);
const [answer, status] = await new Promise((resolve) => worker.once('message', resolve));
assert.deepEqual([answer, status], ['hi', 143]);

// listenTarget: the port outside prebind, fd 3 only for this process.
assert.equal(prebind.listenTarget(3000), 3000);
assert.equal(prebind.listenTarget(3000, { LISTEN_FDS: '1', LISTEN_PID: String(process.pid + 1) }), 3000);
assert.deepEqual(prebind.listenTarget(3000, { LISTEN_FDS: '1', LISTEN_PID: String(process.pid) }), { fd: 3 });

// Wrappers get --group; a command given as a string is refused.
const npmRun = await prebind.start(['sh', '-c', 'exec sleep 60']);
assert.ok(npmRun.argv.includes('--group'));
await npmRun.stop();
await assert.rejects(prebind.start('node server.js'), TypeError);
console.log('api-check: passed');
