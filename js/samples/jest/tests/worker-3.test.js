const { usePrebind, workerServer } = require('prebind/jest');

// A server for this file, this worker's (global-setup.js), and one for the
// whole run (share: every worker that asks by this name gets the same one).
const server = usePrebind(['node', 'server.js']);
const worker = workerServer();
const shared = usePrebind(['node', 'server.js'], { share: `jest-sample-${process.ppid}` });

for (let n = 0; n < 2; n++) {
  test(`own server 3.${n}`, async () => {
    const answer = await (await fetch(`${server.url}/3/${n}`)).json();
    expect(answer).toEqual({ pid: server.pid, path: `/3/${n}` });
  });
}

for (let n = 0; n < 2; n++) {
  test(`worker's server ${n}`, async () => {
    const answer = await (await fetch(`${worker.url}/worker`)).json();
    expect(answer.pid).toBe(worker.pid);
  });
}

for (let n = 0; n < 2; n++) {
  test(`shared server 3.${n}`, async () => {
    const answer = await (await fetch(`${shared.url}/shared`)).json();
    expect(answer.pid).toBe(shared.pid);
    expect(shared.pid).not.toBe(server.pid);
  });
}
