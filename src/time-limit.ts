/** Waits for `work` at most `ms`; rejects with `why` when the time runs out first (the work itself is not stopped). */
export function timeLimit<T>(work: Promise<T>, ms: number, why: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(why)), ms);
    timer.unref();
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/** Like `timeLimit`, for steps that may be skipped: undefined when the work failed or ran out of time. */
export function within<T>(ms: number, work: Promise<T>): Promise<T | undefined> {
  return timeLimit(work, ms, 'time ran out').catch(() => undefined);
}
