const { usePrebind } = require('prebind/jest');

const server = usePrebind(['node', 'server.js'], { env: { CRASH: '1' }, ready: { http: '/' } });
test('a server that crashes at start', async () => {
  expect((await fetch(server.url)).ok).toBe(true);
});
