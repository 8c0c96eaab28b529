module.exports = {
  testMatch: ['<rootDir>/tests/*.test.js'],
  maxWorkers: 4,
};
