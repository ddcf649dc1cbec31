import { execFileSync, spawn } from 'node:child_process';

/** Prometheus's `promtool` (Debian's `prometheus` package ships it), which checks metrics and rules. */
function found(): boolean {
  try {
    execFileSync('promtool', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
export const hasPromtool = found();
// CI requires the tools its tests need (HERALD_TEST_REQUIRE_TOOLS=1): a missing promtool fails, it is not skipped.
if (!hasPromtool && process.env.HERALD_TEST_REQUIRE_TOOLS === '1')
  throw new Error('`promtool` is not on PATH: the metrics and alert-rule checks cannot run (apt-get install -y prometheus)');
if (!hasPromtool)
  console.warn('promtool checks skipped: `promtool` is not on PATH (.ci/run installs it; Debian: apt-get install -y prometheus)');

/** Runs promtool with `args`, `input` on its standard input; its exit code and everything it printed. */
export function promtool(args: string[], input = ''): Promise<{ code: number | null; output: string }> {
  const child = spawn('promtool', args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  child.stdin.end(input);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, output }));
  });
}
