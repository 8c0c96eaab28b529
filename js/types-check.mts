// The package's TypeScript types, as an ESM user's code meets them
// (js/test compiles this and types-check.cts with tsc --strict): the API
// of the issue type-checks, and each @ts-expect-error line is a misuse
// the types must reject (tsc fails on one they let through).
import { start, listenTarget, findPrebind, StartError, ServerExited, type Options, type Server } from 'prebind';
import { prebindTest, prebindGlobalSetup, prebindFixture } from 'prebind/vitest';
import { usePrebind, prebindWorkers, stopPrebindWorkers, workerServer } from 'prebind/jest';
import { prebindWebServer } from 'prebind/playwright';
import { usePrebind as useForFile } from 'prebind/node-test';

const options: Options = {
  intercept: 3000,
  listen: ['web=0'],
  ready: { log: 'listening', http: '/health', exec: 'true' },
  env: { DEBUG: '1', NODE_ENV: undefined },
  cwd: '.',
  timeout: '2s',
  share: 'one-per-run',
};

export async function use(): Promise<number> {
  await using server = await start(['node', 'server.js'], options);
  const url: string = server.url;
  const host: string = server.host;
  const port: number = server.port;
  const ports: Array<number | null> = server.ports;
  const pid: number = server.pid;
  const output: string = server.output();
  const target: { fd: number } | number = listenTarget(3000);
  const binary: string = findPrebind();
  try {
    await start(['nodee']);
  } catch (err) {
    if (err instanceof StartError || err instanceof ServerExited) {
      const why: string = `${err.message} ${err.status} ${err.output}`;
      void why;
    }
  }
  void [url, host, port, ports, pid, output, target, binary];
  // @ts-expect-error: the command is an argv, not a shell line
  await start('node server.js');
  // @ts-expect-error: intercept is a port, not a flag
  await start(['node'], { intercept: true });
  // @ts-expect-error: a misspelt option
  await start(['node'], { timout: 1000 });
  // @ts-expect-error: a port is a number
  const wrong: string = server.port;
  void wrong;
  return server.stop();
}

export const fixtures = {
  server: prebindFixture(['node', 'server.js'], { intercept: 3000 }),
};
export const test = prebindTest({ extend: (f: object) => f }, ['node', 'server.js']);
export const setup = prebindGlobalSetup(['node', 'server.js'], { share: 'run' });
export const workers = prebindWorkers(['node', 'server.js']);
export const teardown = stopPrebindWorkers();
export const perFile: Server = usePrebind(['node', 'server.js'], {}, { beforeAll: () => {}, afterAll: () => {} });
export const perNodeTestFile: Server = useForFile(['node', 'server.js']);
export const worker: string = workerServer().url;
export const webServer = prebindWebServer({ command: ['node', 'server.js'], ready: { http: '/health' } });
// @ts-expect-error: webServer needs its command
prebindWebServer({});
