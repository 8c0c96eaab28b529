const { usePrebind } = require('prebind/jest');

// A server for this file, and one for the whole run (share: every worker
// that asks for it by this name gets the same one).
const server = usePrebind(['node', 'server.js']);
const shared = usePrebind(['node', 'server.js'], { share: `jest-sample-${process.ppid}` });

for (let n = 0; n < 4; n++) {
  test(`own server 4.${n}`, async () => {
    const answer = await (await fetch(`${server.url}/4/${n}`)).json();
    expect(answer).toEqual({ pid: server.pid, path: `/4/${n}` });
  });
}

for (let n = 0; n < 2; n++) {
  test(`shared server 4.${n}`, async () => {
    const answer = await (await fetch(`${shared.url}/shared`)).json();
    expect(answer.pid).toBe(shared.pid);
    expect(shared.pid).not.toBe(server.pid);
  });
}
