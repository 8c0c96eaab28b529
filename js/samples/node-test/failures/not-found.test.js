import { test } from 'node:test';
import assert from 'node:assert/strict';
import { usePrebind } from 'prebind/node-test';

const server = usePrebind(['nodee', 'server.js']);
test('a mistyped command', async () => {
  assert.ok((await fetch(server.url)).ok);
});
