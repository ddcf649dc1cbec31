/**
 * Install scripts of dependencies are decided in package.json's `allowScripts` (README, "Install
 * scripts"), so `npm ci` has none left to warn about. msgpackr-extract's is denied: it only
 * compiles the native extractor where no prebuilt binary fits, and msgpackr works without it.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/imports.js';

describe('install scripts', () => {
  it('every dependency with one is reviewed: npm lists none left', () => {
    const listed = execFileSync('npm', ['install-scripts', 'ls'], { cwd: ROOT, encoding: 'utf8' });
    expect(listed.trim()).toBe('No packages with unreviewed install scripts.');
  });

  it("msgpackr-extract's is denied, and msgpackr still packs and unpacks what BullMQ hands it", async () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };
    expect(manifest.allowScripts).toEqual({ 'msgpackr-extract': false });
    const { Packr } = await import('msgpackr');
    // BullMQ's packer options (its scripts decode the arguments with cmsgpack in Lua).
    const packr = new Packr({ useRecords: false, encodeUndefinedAsNil: true });
    const args = { jobId: 'ntc_0d00mx1l4t4jmyryn45sd718zk6o-email-send', delay: 0, name: 'email-send', 'ä€🎉': [1, null, 'x'] };
    expect(packr.unpack(packr.pack(args))).toEqual(args);
  });
});
