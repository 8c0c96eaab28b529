module.exports = { rootDir: '..', testMatch: ['<rootDir>/failures/*.test.js'] };
