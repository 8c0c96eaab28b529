import { test } from 'node:test';
import assert from 'node:assert/strict';
import { usePrebind } from 'prebind/node-test';

// A server for this file (node --test runs each file in a process of its
// own), and one for the whole run: every file that asks by this name gets
// the same one.
const server = usePrebind(['node', 'server.js']);
const shared = usePrebind(['node', 'server.js'], { share: `node-test-sample-${process.ppid}` });

for (let n = 0; n < 4; n++) {
  test(`own server 1.${n}`, async () => {
    const answer = await (await fetch(`${server.url}/1/${n}`)).json();
    assert.deepEqual(answer, { pid: server.pid, path: `/1/${n}` });
  });
}

for (let n = 0; n < 2; n++) {
  test(`shared server 1.${n}`, async () => {
    const answer = await (await fetch(`${shared.url}/shared`)).json();
    assert.equal(answer.pid, shared.pid);
    assert.notEqual(shared.pid, server.pid);
  });
}
