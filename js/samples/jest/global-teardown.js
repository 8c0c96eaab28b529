const { stopPrebindWorkers } = require('prebind/jest');

module.exports = stopPrebindWorkers();
