import { test } from 'node:test';
import assert from 'node:assert/strict';
import { usePrebind } from 'prebind/node-test';

const server = usePrebind(['node', 'server.js'], { env: { PORT: '3001' }, intercept: 3000 });
test('a wrong --intercept port', async () => {
  assert.ok((await fetch(server.url)).ok);
});
