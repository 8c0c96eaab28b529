import type { Options, Server } from './index';

export type Fixture = [({}: object, use: (server: Server) => Promise<void>) => Promise<void>, { scope: 'worker'; timeout: number }];

/** A worker-scoped fixture (Vitest's test.extend, Playwright's test.extend): one server per worker. */
export declare function prebindFixture(command: string[], options?: Options): Fixture;
/** base.extend() with a worker-scoped `server` fixture and `baseURL` (Playwright) set to its URL. */
export declare function prebindTest<T extends { extend: (fixtures: any) => any }>(
  base: T,
  command: string[],
  options?: Options & { baseURL?: boolean },
): ReturnType<T['extend']>;
/** One server for this file (beforeAll/afterAll: Jest's globals, Vitest's with globals: true, or `hooks`). */
export declare function usePrebind(
  command: string[],
  options?: Options,
  hooks?: { beforeAll: (fn: () => Promise<void>, timeout?: number) => void; afterAll: (fn: () => Promise<void>, timeout?: number) => void },
): Server;
export interface ProvidedServer {
  url: string;
  host: string;
  port: number;
  ports: Array<number | null>;
  pid: number;
}
/** Vitest's globalSetup: one server per run, given to the tests as inject(key) (default 'prebind'). */
export declare function prebindGlobalSetup(
  command: string[],
  options?: Options,
  key?: string,
): (context: { provide: (key: string, value: ProvidedServer) => void }) => Promise<() => Promise<number>>;
/** Jest's globalSetup: one server per worker (globalConfig.maxWorkers), started before the workers. */
export declare function prebindWorkers(command: string[], options?: Options, name?: string): (globalConfig: { maxWorkers: number }) => Promise<void>;
/** Jest's globalTeardown of prebindWorkers(). */
export declare function stopPrebindWorkers(name?: string): () => Promise<void>;
/** This Jest worker's server of prebindWorkers() (JEST_WORKER_ID). */
export declare function workerServer(name?: string): { url: string; host: string; port: number; pid: number };
/** Playwright's webServer entry: sets process.env.PREBIND_URL and PREBIND_PORT (NAME_URL with `name`) for the workers. */
export declare function prebindWebServer(options: Options & { command: string[]; name?: string }): {
  command: string;
  wait: { stdout: RegExp };
  timeout: number;
  gracefulShutdown: { signal: 'SIGTERM'; timeout: number };
  stdout: 'pipe';
  stderr: 'pipe';
  cwd?: string;
  env?: Record<string, string>;
  name: string;
};
