// The server under test: on prebind's socket (fd 3) under prebind, on
// PORT or 3000 without it.
import http from 'node:http';
import { listenTarget } from 'prebind';

if (process.env.CRASH) {
  console.error('server: cannot open the database');
  process.exit(3);
}
http
  .createServer((req, res) => res.end(JSON.stringify({ pid: process.pid, path: req.url })))
  .listen(listenTarget(Number(process.env.PORT || 3000)));
