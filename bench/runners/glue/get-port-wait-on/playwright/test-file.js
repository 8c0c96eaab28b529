import { test } from '../fixtures.js';
