const { usePrebind } = require('prebind/jest');

const server = usePrebind(['nodee', 'server.js']);
test('a mistyped command', async () => {
  expect((await fetch(server.url)).ok).toBe(true);
});
