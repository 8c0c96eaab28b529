// The server of section 14's start → first answer: the same file both
// ways. Under prebind it serves the socket prebind bound (fd 3, as
// listenTarget() of the npm package says); else it binds PORT itself.
const http = require('node:http');

http
  .createServer((req, res) => res.end('hello\n'))
  .listen(process.env.LISTEN_FDS ? { fd: 3 } : Number(process.env.PORT));
