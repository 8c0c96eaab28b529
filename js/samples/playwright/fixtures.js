import { test as base } from '@playwright/test';
import { prebindTest } from 'prebind/playwright';

// One server per worker, and baseURL set to it: request.get('/path').
export const test = prebindTest(base, ['node', 'server.js']);
