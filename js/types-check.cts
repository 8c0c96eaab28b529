// The same types from CommonJS (require conditions): see types-check.mts.
import { start, type Server } from 'prebind';
import { usePrebind } from 'prebind/jest';

export async function use(): Promise<number> {
  const server: Server = await start(['node', 'server.js'], { intercept: 3000 });
  // @ts-expect-error: intercept is a port, not a flag
  await start(['node'], { intercept: true });
  return server.stop();
}
export const perFile: Server = usePrebind(['node', 'server.js']);
