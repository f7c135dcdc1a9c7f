#!/usr/bin/env node
// A deck external worker in Node 20, no packages (global fetch).
//
// Over deck's worker protocol: a long-poll claim for as many jobs as there are free slots,
// each job run as its own task, one heartbeat loop for the held jobs, then complete or fail.
// deck records cancels and timeouts itself and says so in the heartbeat's answer: the worker
// only stops.
//
// Run:  [DECK_TOKEN=...] node pull_worker.mjs [--url http://127.0.0.1:8080] [--worker NAME]
//           [--types a,b] [--queues q] [--concurrency N]
import { hostname } from "node:os";
import { parseArgs } from "node:util";

/** May succeed later: retried by the job's policy, not before retryAfterSeconds (whole). */
class Retry extends Error {
  constructor(message, retryAfterSeconds = null) {
    super(message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}
/** Can never succeed: to the dead-letter queue at once. */
class Fatal extends Error {}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** @typedef {(percent: number, message?: string) => Promise<void>} ReportProgress */
/**
 * Your code: job type -> async function(payload, job, reportProgress) returning a JSON-able
 * result. Throw Retry for a transient failure, Fatal for one that can never succeed.
 * @type {Record<string, (payload: any, job: any, progress: ReportProgress) => Promise<any>>}
 */
const HANDLERS = {
  "demo.reverse": async (payload, job, reportProgress) => {
    await reportProgress(50, "reversing");
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
    // A cancel comes only through the heartbeat: check the flag often.
    for (let i = 0; i < 300 && !job.abandoned; i++) await sleep(100);
    return job.abandoned ? null : { slept: 30 };
  },
};

const { values: opts } = parseArgs({
  options: {
    url: { type: "string", default: "http://127.0.0.1:8080" },
    worker: { type: "string", default: `node-${hostname()}` },
    types: { type: "string", default: Object.keys(HANDLERS).join(",") }, // only what it can run
    queues: { type: "string", default: "" },
    concurrency: { type: "string", default: "4" },
  },
});
const base = opts.url.replace(/\/$/, "") + "/api/v1/workers";
const concurrency = Number(opts.concurrency);
const headers = { "content-type": "application/json" };
if (process.env.DECK_TOKEN) headers.authorization = `Bearer ${process.env.DECK_TOKEN}`;

/** POST JSON; [status, answer]. A 409 (lease_lost) is an answer: the job is not ours. */
async function post(path, body) {
  const res = await fetch(base + path, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok && res.status !== 409) throw new Error(`HTTP ${res.status} from ${path}: ${text}`);
  return [res.status, text ? JSON.parse(text) : null];
}

const held = new Map(); // job id -> job; its `abandoned` flag: stop it, report nothing
let stopping = false;
let beatEvery = 1000; // until a claim says how often deck wants heartbeats

async function execute(job) {
  const { id, lease } = job;
  const reportProgress = async (percent, message = "") => {
    const [status] = await post(`/jobs/${id}/progress`, { lease, percent, message });
    if (status === 409) job.abandoned = true; // not ours any more
  };
  let path = "complete";
  const report = { lease };
  try {
    if (stopping) path = "release"; // claimed after SIGTERM: give it back unrun
    else if (!HANDLERS[job.type]) throw new Fatal(`this worker has no handler for ${job.type}`);
    else report.result = (await HANDLERS[job.type](job.payload, job, reportProgress)) ?? null;
  } catch (e) {
    // Retry and Fatal as asked; anything else may be passing: the job's retry policy decides.
    path = "fail";
    report.message = e instanceof Error ? e.message : String(e);
    report.kind = e?.constructor?.name || "Error";
    if (e instanceof Retry) report.retry_after_seconds = e.retryAfterSeconds;
    if (e instanceof Fatal) report.fatal = true;
  }
  try {
    if (!job.abandoned) {
      // A stopped job's outcome is already recorded.
      const [, answer] = await post(`/jobs/${id}/${path}`, report);
      console.log(job.type, id, answer.outcome ?? answer.error.code);
    }
  } catch (e) {
    console.error(job.type, id, path, "failed:", e.message); // deck's timeouts rescue it later
  } finally {
    held.delete(id);
  }
}

async function heartbeat() {
  for (;;) {
    await sleep(beatEvery);
    const byLease = new Map();
    for (const { lease, id } of held.values()) {
      byLease.set(lease, [...(byLease.get(lease) ?? []), id]);
    }
    for (const [lease, jobs] of byLease) {
      try {
        const [, beat] = await post("/heartbeat", { lease, jobs });
        // Cancelled, timed out or rescued: stop them, report nothing.
        for (const id of [...beat.stop.map((s) => s.id), ...beat.lost]) {
          const job = held.get(id);
          if (job) job.abandoned = true;
        }
      } catch (e) {
        console.error("heartbeat failed:", e.message); // one missed beat is fine
      }
    }
  }
}

// Stop claiming; the claim in flight ends within its wait, and its jobs are released.
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => (stopping = true));
heartbeat();
while (!stopping) {
  const free = concurrency - held.size;
  if (free <= 0) {
    await sleep(50); // every slot busy: claim again when a job ends
    continue;
  }
  const body = {
    worker: opts.worker, limit: free, wait_seconds: 20, types: opts.types.split(","),
    queues: opts.queues ? opts.queues.split(",") : null,
    concurrency, host: hostname(), pid: process.pid, agent: "node-example/1",
  };
  let claim;
  try {
    [, claim] = await post("/claim", body);
  } catch (e) {
    console.error("claim failed:", e.message); // deck restarting or unreachable
    await sleep(1000);
    continue;
  }
  beatEvery = Math.max(500, (claim.heartbeat_seconds * 1000) / 2);
  for (const job of claim.jobs) {
    held.set(job.id, job);
    execute(job);
  }
}
while (held.size > 0) await sleep(100); // running jobs finish (if killed first, deck rescues them)
process.exit(0);
