/** A duration: milliseconds, or prebind's syntax ("500ms", "2s", "1m", "infinity"). */
export type Duration = number | string;

export interface Options {
  /** Sockets to bind (`--listen`): "0", ["web=0", "admin=/run/a.sock"] or {web: "0"}; default one TCP socket on 127.0.0.1, port 0. */
  listen?: string | string[] | Record<string, string>;
  /** The server's own bind() of this port gets prebind's socket (`--intercept`): 3000, ["web=3000"] or {web: 3000}. */
  intercept?: number | string | Array<number | string> | Record<string, number>;
  /** How the bind is caught (`--intercept-via`). */
  interceptVia?: 'auto' | 'seccomp' | 'preload' | 'forward';
  /** Publish only once ready: true (sd_notify READY=1), or {log: REGEX, http: "/health" | true, exec: "probe"}. */
  ready?: boolean | { log?: string; http?: string | boolean; exec?: string; notify?: boolean };
  /** Variables for the server (merged into this process's environment; undefined or null removes one). */
  env?: Record<string, string | number | undefined | null>;
  /** Variables prebind sets, with templates ({url}, {port}) (`--setenv`); null copies one. */
  setenv?: Record<string, string | null>;
  /** Expand {port}, {url}... in the command (`--subst`). */
  subst?: boolean;
  /** The server's working directory. */
  cwd?: string;
  /** How long start() waits for prebind to publish (default 4000 ms, below the runners' 5 s); prebind's own --ready-timeout is set below it. */
  timeout?: Duration;
  /** How long the server has after SIGTERM before it is killed (`--kill-after`, default 3000 ms). */
  stopTimeout?: Duration;
  /** One server for every start() with this name, command and options, in any process of this user (`--share`). */
  share?: string;
  /** How long a shared server outlives its last holder (`--share-linger`). */
  shareLinger?: Duration;
  /** Signal the server's whole process group (`--group`); default true for npm, npx, yarn, pnpm, sh, bash, dash. */
  group?: boolean;
  /** `--restart`. */
  restart?: 'no' | 'on-failure' | 'always';
  /** Any other prebind options, passed as they are before "--". */
  options?: string[];
  /** The prebind to run (default: $PREBIND, the platform package's, PATH). */
  binary?: string;
}

/** One socket as prebind published it (`--format=json`). */
export interface Socket {
  fd: number;
  name: string;
  family: 'ipv4' | 'ipv6' | 'unix';
  type: 'stream' | 'dgram';
  address: string;
  port?: number;
  url: string;
}

export declare class Server {
  /** The first socket's URL: http://127.0.0.1:41234. */
  readonly url: string;
  /** The first socket's host to connect to (127.0.0.1), or its unix path. */
  readonly host: string;
  /** The first socket's port (null for a unix socket). */
  readonly port: number;
  /** Every socket's port, in fd order. */
  readonly ports: Array<number | null>;
  /** Every socket, in fd order. */
  readonly sockets: Socket[];
  /** The server's pid. */
  readonly pid: number;
  /** prebind's pid. */
  readonly prebindPid: number;
  /** The prebind command line. */
  readonly argv: string[];
  /** prebind's exit status once it has exited, else null. */
  readonly exitStatus: number | null;
  /** What prebind and the server wrote to stdout and stderr so far (the last 1 MiB). */
  output(): string;
  /** Resolves to prebind's exit status once it has exited. */
  wait(): Promise<number>;
  /** Stop the server; resolves to prebind's exit status; rejects with ServerExited if it had died. */
  stop(): Promise<number>;
  /** `await using server = await start(...)`: stop() at the end of the scope (void: TypeScript's AsyncDisposable). */
  [Symbol.asyncDispose](): Promise<void>;
}

export declare class PrebindError extends Error {}
export declare class PrebindNotFound extends PrebindError {}
declare class Failure extends PrebindError {
  readonly headline: string;
  readonly command: string[];
  /** prebind's exit status (null when prebind was stopped by us, after a timeout). */
  readonly status: number | null;
  /** The last lines of output, prebind's and the server's. */
  readonly output: string;
  /** prebind's own messages (lines that start with "prebind:"). */
  readonly errorLines: string[];
}
/** prebind exited or published nothing in time: its message, exit status and last output lines. */
export declare class StartError extends Failure {}
/** The server exited before stop(). */
export declare class ServerExited extends Failure {}

/** Start `command` under prebind; resolves once prebind has published its sockets. */
export declare function start(command: string[], options?: Options): Promise<Server>;
/** {fd: 3} when prebind passed this process its socket, else `port`: app.listen(listenTarget(3000)). */
export declare function listenTarget<T>(port: T, env?: Record<string, string | undefined>): { fd: number } | T;
/** The prebind binary start() runs; throws PrebindNotFound (on macOS and Windows: prebind is Linux-only). */
export declare function findPrebind(binary?: string): string;
/** What an exit status of prebind means. */
export declare function describeStatus(status: number): string;
export declare const DEFAULT_TIMEOUT: number;
export declare const DEFAULT_STOP_TIMEOUT: number;
