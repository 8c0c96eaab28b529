const { prebindWorkers } = require('prebind/jest');

// One server per Jest worker, read in a test with workerServer().
module.exports = prebindWorkers(['node', 'server.js']);
