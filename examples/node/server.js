'use strict';
// An HTTP server that never binds: it takes its listening socket from
// prebind (or systemd) as fd 3, with node's standard library only.
//
//   prebind --print=url -- node server.js
//
// SIGTERM (forwarded by prebind) closes it gracefully, with status 0.
// Works on node 18 (Debian 12) and later.

const http = require('node:http');

const LISTEN_FDS_START = 3; // SD_LISTEN_FDS_START

// The first socket passed by socket activation, read as sd_listen_fds(3)
// does: LISTEN_PID must be our pid. `npm run start` or `sh -c` without
// exec put another process in between, and the socket is not for us.
function listenFd() {
  const { LISTEN_PID: pid, LISTEN_FDS: fds } = process.env;
  if (pid !== String(process.pid)) {
    throw new Error(`LISTEN_PID=${pid} is not my pid ${process.pid}: ` +
                    'run me directly (node server.js) or with exec, not through npm run');
  }
  if (!(Number(fds) >= 1)) {
    throw new Error('no sockets passed (LISTEN_FDS)');
  }
  // The variables are ours alone: processes we start must not take them.
  for (const name of ['LISTEN_PID', 'LISTEN_FDS', 'LISTEN_FDNAMES']) {
    delete process.env[name];
  }
  return LISTEN_FDS_START;
}

function main() {
  let fd;
  try {
    fd = listenFd();
  } catch (err) {
    console.error(`server.js: ${err.message}`);
    process.exit(1);
  }

  const server = http.createServer((req, res) => {
    const body = `node pid=${process.pid} path=${req.url}\n`;
    res.writeHead(200, {
      'Content-Type': 'text/plain',
      'Content-Length': Buffer.byteLength(body),
    });
    res.end(body);
  });

  // {fd: 3}: take the listening socket as it is; node neither binds nor
  // listens again.
  server.listen({ fd });

  process.on('SIGTERM', () => {
    server.close(() => process.exit(0));
    // close() waits for idle keep-alive connections: end them (node >= 18.2).
    if (server.closeIdleConnections) server.closeIdleConnections();
  });
}

main();
