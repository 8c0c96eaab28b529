module.exports = {
  testMatch: ['<rootDir>/tests/*.test.js'],
  maxWorkers: 4,
  globalSetup: '<rootDir>/global-setup.js',
  globalTeardown: '<rootDir>/global-teardown.js',
};
