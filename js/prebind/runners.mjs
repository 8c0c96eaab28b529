import runners from './runners.cjs';

export const { prebindFixture, prebindTest, usePrebind, prebindGlobalSetup, prebindWebServer } = runners;
