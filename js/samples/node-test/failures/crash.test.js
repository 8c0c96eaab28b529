import { test } from 'node:test';
import assert from 'node:assert/strict';
import { usePrebind } from 'prebind/node-test';

const server = usePrebind(['node', 'server.js'], { env: { CRASH: '1' }, ready: { http: '/' } });
test('a server that crashes at start', async () => {
  assert.ok((await fetch(server.url)).ok);
});
