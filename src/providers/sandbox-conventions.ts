/**
 * What Herald's sandbox mode relies on of its emulators without importing them: the product
 * never loads the sandbox package but to start it in process (a live process runs without it),
 * and the emulator is often given by URL instead (`npm start` starts it before the worker, the
 * tests start their own, compose runs it in a container). It publishes the feed providers' events
 * on these queues, through these topics; the feed sweep reads them when sandbox mode names no
 * events queue or topic. The emulator states the same values, and a test holds the two together.
 */

/** The account of the emulated AWS services: the queue URLs' path and the topics' ARNs. */
export const SANDBOX_ACCOUNT_ID = '000000000000';

/** The emulated events queues, under `<SQS endpoint>/<account>/`. */
export const SANDBOX_QUEUE_NAMES = { ses: 'herald-ses-events', awsSms: 'herald-aws-sms-events' } as const;

/** The SNS topics the emulated providers publish through. */
export const SANDBOX_TOPIC_ARNS = {
  ses: `arn:aws:sns:us-east-1:${SANDBOX_ACCOUNT_ID}:herald-ses-events`,
  awsSms: `arn:aws:sns:us-east-1:${SANDBOX_ACCOUNT_ID}:herald-aws-sms-events`,
} as const;
