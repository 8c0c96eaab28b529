// node --test has no global setup before Node 24: one server for the run
// is started by a wrapper (`npm test` runs this), its URL in the environment.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { startServer } from './start-server.js';

const shared = await startServer(['node', 'server.js']);
const tests = spawn(process.execPath, ['--test', '--test-concurrency=4', 'tests/'], {
  env: { ...process.env, SHARED_URL: shared.url },
  stdio: 'inherit',
});
const [code] = await once(tests, 'exit');
await shared.stop();
process.exit(code ?? 1);
