import { expect, inject } from 'vitest';
import { test } from '../fixtures.js';

for (let n = 0; n < 4; n++) {
  test(`own server 3.${n}`, async ({ server }) => {
    const answer = await (await fetch(`${server.url}/3/${n}`)).json();
    expect(answer).toEqual({ pid: server.pid, path: `/3/${n}` });
  });
}

for (let n = 0; n < 2; n++) {
  test(`shared server 3.${n}`, async () => {
    const shared = inject('prebind');
    const answer = await (await fetch(`${shared.url}/shared`)).json();
    expect(answer.pid).toBe(shared.pid);
  });
}
