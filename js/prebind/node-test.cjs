'use strict';
// node:test: one server for the tests of a file (or of a describe block),
// started by before(), stopped by after().

const { before, after } = require('node:test');
const runners = require('./runners.cjs');

/** `const server = usePrebind(['node', 'server.js'])` at the top of a test
 * file or describe block; read server.url in the tests. */
function usePrebind(command, options = {}) {
  const hooks = {
    beforeAll: (fn, timeout) => before(fn, { timeout }),
    afterAll: (fn, timeout) => after(fn, { timeout }),
  };
  return runners.usePrebind(command, options, hooks);
}

module.exports = { usePrebind };
