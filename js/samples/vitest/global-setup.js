import { prebindGlobalSetup } from 'prebind/vitest';

export default prebindGlobalSetup(['node', 'server.js']);
