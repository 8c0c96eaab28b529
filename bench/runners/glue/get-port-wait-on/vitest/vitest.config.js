    globalSetup: ['./global-setup.js'],
