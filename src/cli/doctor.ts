/** `herald doctor`: what a Herald process needs before it can be trusted with notices (src/doctor.ts checks it). */
import { parseArgs } from 'node:util';
import { diagnose, formatFindings } from '../doctor.js';
import type { CliCommand, CliIo } from './command.js';
import { writeLines } from './output.js';

export const doctorCommand: CliCommand = {
  name: 'doctor',
  summary: 'checks the configuration, Redis, the clock, the archive and the providers, and says what to fix',
  usage: `herald doctor
    Checks the configuration, Redis (reachable, a master, noeviction, append-only file), this
    machine's clock against Redis TIME, the archive (writes, reads back and deletes an object)
    and the providers (an authenticated call that sends nothing), and says what to fix.
    Exits 1 when something must be fixed.
`,
  run: doctor,
};

async function doctor(args: string[], io: CliIo): Promise<number> {
  parseArgs({ args, allowPositionals: false, options: {} });
  // It reports a bad configuration instead of stopping at it, so it reads the environment itself.
  const findings = await diagnose(io.env, io.now);
  await writeLines(io.stdout, formatFindings(findings));
  return findings.some((f) => f.verdict === 'fail') ? 1 : 0;
}
