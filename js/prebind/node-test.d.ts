import type { Options, Server } from './index';

/** One server for this file or describe block: started by before(), stopped by after(). */
export declare function usePrebind(command: string[], options?: Options): Server;
