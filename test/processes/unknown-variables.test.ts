/** A misspelt HERALD_* variable is named at start-up by the web process, with the variable it most likely meant. */
import { describe, expect, it } from 'vitest';
import { testEnv, testPrefix } from '../helpers/env.js';
import { cleanUp } from '../helpers/herald.js';
import { WebProcess } from '../helpers/web-process.js';

describe('at start-up', () => {
  it('warns of a HERALD_* variable Herald does not read, and still starts', async () => {
    const prefix = testPrefix('unknownvar');
    const web = await new WebProcess(testEnv(prefix, { HERALD_CONTENT_TLL: '3d' })).start();
    try {
      expect((await web.call('GET', '/healthz')).status).toBe(200);
      expect(web.output).toMatch(
        /"variable":"HERALD_CONTENT_TLL","meant":"HERALD_CONTENT_TTL".*HERALD_CONTENT_TLL is not a variable Herald reads: did you mean HERALD_CONTENT_TTL\?/,
      );
    } finally {
      await web.stop('SIGTERM');
      await cleanUp(prefix);
    }
  });
});
