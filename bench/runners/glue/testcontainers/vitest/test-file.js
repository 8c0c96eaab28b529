import { test } from '../fixtures.js';
    const shared = inject('server');
