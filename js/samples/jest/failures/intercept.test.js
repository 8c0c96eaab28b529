const { usePrebind } = require('prebind/jest');

// The server binds 3001: prebind waits for 3000 and says so.
const server = usePrebind(['node', 'server.js'], { env: { PORT: '3001' }, intercept: 3000 });
test('a wrong --intercept port', async () => {
  expect((await fetch(server.url)).ok).toBe(true);
});
