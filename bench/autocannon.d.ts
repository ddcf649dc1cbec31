/** The part of autocannon's API the benchmark uses (the package ships no types). */
declare module 'autocannon' {
  interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    p50: number;
    p90: number;
    p97_5: number;
    p99: number;
    total: number;
  }
  interface RequestSpec {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string;
    /** Called before each request; returns the request to send. */
    setupRequest?: (request: RequestSpec, context: Record<string, unknown>) => RequestSpec;
    /** Called with each answer's status and body. */
    onResponse?: (status: number, body: string, context: Record<string, unknown>, headers: Record<string, string>) => void;
  }
  interface Options {
    url: string;
    requests?: RequestSpec[];
    method?: string;
    connections?: number;
    duration?: number;
    amount?: number;
    body?: string | Buffer;
    headers?: Record<string, string>;
    timeout?: number;
    /** Milliseconds between samples (default 1000); a run with `amount` returns at the first sample after its last answer. */
    sampleInt?: number;
  }
  interface Result {
    requests: Histogram;
    latency: Histogram;
    throughput: Histogram;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    duration: number;
  }
  function autocannon(options: Options): Promise<Result>;
  export default autocannon;
}
