import { test as shared, expect } from '@playwright/test';
import { test } from '../fixtures.js';

for (let n = 0; n < 4; n++) {
  test(`own server 1.${n}`, async ({ request, server }) => {
    const answer = await (await request.get(`/1/${n}`)).json();
    expect(answer).toEqual({ pid: server.pid, path: `/1/${n}` });
  });
}

for (let n = 0; n < 2; n++) {
  shared(`shared server 1.${n}`, async ({ request, baseURL }) => {
    expect(baseURL).toBe(process.env.PREBIND_URL);
    const answer = await (await request.get('/shared')).json();
    expect(answer.path).toBe('/shared');
  });
}
