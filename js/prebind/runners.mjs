import runners from './runners.cjs';

export const { prebindFixture, prebindTest, usePrebind, prebindGlobalSetup, prebindWorkers, stopPrebindWorkers, workerServer, prebindWebServer } = runners;
