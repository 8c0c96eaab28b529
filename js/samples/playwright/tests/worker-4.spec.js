import { test as shared, expect } from '@playwright/test';
import { test } from '../fixtures.js';

for (let n = 0; n < 4; n++) {
  test(`own server 4.${n}`, async ({ request, server }) => {
    const answer = await (await request.get(`/4/${n}`)).json();
    expect(answer).toEqual({ pid: server.pid, path: `/4/${n}` });
  });
}

for (let n = 0; n < 2; n++) {
  shared(`shared server 4.${n}`, async ({ request, baseURL }) => {
    expect(baseURL).toBe(process.env.PREBIND_URL);
    const answer = await (await request.get('/shared')).json();
    expect(answer.path).toBe('/shared');
  });
}
