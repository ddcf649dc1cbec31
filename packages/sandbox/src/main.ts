/**
 * Runs the sandbox on its own: `node packages/sandbox/dist/main.js` (PORT, default 4010; HOST,
 * default 127.0.0.1). Point Herald at it with POSTMARK_API_URL and TWILIO_API_URL.
 */
import { startSandbox } from './index.js';

const sandbox = await startSandbox({
  port: Number(process.env.PORT ?? 4010),
  host: process.env.HOST ?? '127.0.0.1',
});
console.log(`Herald sandbox (Postmark + Twilio emulators) listening on ${sandbox.url}`);
console.log(`  POSTMARK_API_URL=${sandbox.url} TWILIO_API_URL=${sandbox.url} INFRAI_API_URL=${sandbox.url}`);
console.log(`  inspect: ${sandbox.url}/__sandbox/emails  ${sandbox.url}/__sandbox/sms  ${sandbox.url}/__sandbox/requests`);

let stopping = false;
const stop = (): void => {
  // A second signal forces the exit.
  if (stopping) process.exit(1);
  stopping = true;
  // Closing drops every connection, so the process then ends on its own.
  void sandbox.close();
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
