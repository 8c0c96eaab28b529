import { defineConfig } from 'vitest/config';

export default defineConfig({ test: { include: ['failures/*.test.js'] } });
