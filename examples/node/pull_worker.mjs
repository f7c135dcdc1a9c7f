#!/usr/bin/env node
// A deck external worker in Node 20, no packages (global fetch).
//
// It pulls jobs over deck's worker protocol: claim (long-poll), heartbeat, progress,
// complete / fail. Jobs run concurrently as promises; one heartbeat timer keeps every held
// job alive and stops the ones deck says to stop (an operator cancel, the execution timeout).
//
// Run:  DECK_TOKEN=... node pull_worker.mjs --url http://127.0.0.1:8080 --worker node-1 \
//           [--types demo.reverse,demo.flaky] [--queues default] [--concurrency 4]
import { hostname } from "node:os";
import { parseArgs } from "node:util";

/** May succeed later: deck retries it by the job's policy (not before retryAfterSeconds). */
class Retry extends Error {
  constructor(message, retryAfterSeconds) {
    super(message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}
/** Can never succeed: straight to the dead-letter queue. */
class Fatal extends Error {}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** @type {Record<string, (payload: any, job: any, progress: Function) => Promise<any>>} */
const HANDLERS = {
  "demo.reverse": async (payload, job, progress) => {
    await progress(50, "reversing");
    return { reversed: [...payload.text].reverse().join("") };
  },
  "demo.flaky": async (payload, job) => {
    if (job.attempt < 2) throw new Retry("the downstream is busy", 1);
    return { attempt: job.attempt };
  },
  "demo.reject": async () => {
    throw new Fatal("rejected by the example");
  },
  "demo.slow": async (payload, job) => {
    // Up to 30 s, in steps short enough to notice a stop quickly.
    for (let i = 0; i < 300 && !job.stopped; i++) await sleep(100);
    return job.stopped ? null : { slept: 30 };
  },
};

const { values: opts } = parseArgs({
  options: {
    url: { type: "string", default: "http://127.0.0.1:8080" },
    worker: { type: "string", default: `node-${hostname()}` },
    types: { type: "string", default: "" },
    queues: { type: "string", default: "" },
    concurrency: { type: "string", default: "4" },
  },
});
const base = opts.url.replace(/\/$/, "") + "/api/v1/workers";
const concurrency = Number(opts.concurrency);

/** POST JSON; returns [status, answer]. 409 lease_lost is an answer, not an error. */
async function post(path, body) {
  const headers = { "content-type": "application/json" };
  if (process.env.DECK_TOKEN) headers.authorization = `Bearer ${process.env.DECK_TOKEN}`;
  const res = await fetch(base + path, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok && res.status !== 409) throw new Error(`HTTP ${res.status} from ${path}: ${text}`);
  return [res.status, text ? JSON.parse(text) : null];
}

const held = new Map(); // job id -> job (with its lease and a stop flag)
let stopping = false;
let beatEvery = 5000;

async function execute(job) {
  const { id, lease } = job;
  const progress = (percent, message = "") =>
    post(`/jobs/${id}/progress`, { lease, percent, message });
  let path, report;
  try {
    const handler = HANDLERS[job.type];
    if (!handler) throw new Fatal(`this worker has no handler for ${job.type}`);
    path = "/complete";
    report = { lease, result: await handler(job.payload, job, progress) };
  } catch (e) {
    path = "/fail";
    report = { lease, message: String(e.message ?? e), kind: e.constructor?.name ?? "Error" };
    if (e instanceof Fatal) report.fatal = true;
    if (e instanceof Retry && e.retryAfterSeconds != null) report.retry_after_seconds = e.retryAfterSeconds;
  }
  try {
    if (!job.stopped) {
      // A stopped job's outcome is already recorded.
      const [status, answer] = await post(`/jobs/${id}${path}`, report);
      console.log(job.type, id, status, answer.outcome ?? answer.error.code);
    }
  } catch (e) {
    console.error("report failed:", e.message);
  } finally {
    held.delete(id);
  }
}

async function heartbeat() {
  while (!stopping || held.size > 0) {
    await sleep(beatEvery);
    const byLease = new Map();
    for (const job of held.values()) byLease.set(job.lease, [...(byLease.get(job.lease) ?? []), job.id]);
    for (const [lease, jobs] of byLease) {
      try {
        const [, beat] = await post("/heartbeat", { lease, jobs });
        // Cancelled, timed out or rescued: stop, report nothing.
        for (const id of [...beat.stop.map((s) => s.id), ...beat.lost]) {
          const job = held.get(id);
          if (job) job.stopped = true;
        }
      } catch (e) {
        console.error("heartbeat failed:", e.message);
      }
    }
  }
}

async function main() {
  for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => (stopping = true));
  heartbeat();
  while (!stopping) {
    const free = concurrency - held.size;
    if (free <= 0) {
      await sleep(50);
      continue;
    }
    const body = {
      worker: opts.worker, limit: free, wait_seconds: 5, concurrency,
      host: hostname(), pid: process.pid, agent: "node-example/1",
    };
    if (opts.types) body.types = opts.types.split(",");
    if (opts.queues) body.queues = opts.queues.split(",");
    let claim;
    try {
      [, claim] = await post("/claim", body);
    } catch (e) {
      // deck restarting or unreachable: try again shortly.
      console.error("claim failed:", e.message);
      await sleep(1000);
      continue;
    }
    beatEvery = Math.max(1, Math.floor(claim.heartbeat_seconds / 2)) * 1000;
    for (const job of claim.jobs) {
      held.set(job.id, job);
      execute(job);
    }
  }
  // Stopping: running jobs finish (a job not finished by the grace time is rescued).
  while (held.size > 0) await sleep(100);
  process.exit(0);
}

main();
