// A deck HTTP handler in Node (20+), no packages.
//
// deck POSTs each job of the types mapped to this URL (deck.toml):
//
//   [[handlers]]
//   types = ["email.*"]
//   url = "http://127.0.0.1:9000/jobs"
//   secret_env = "MAILER_SECRET"
//
// The answer decides the outcome: 2xx = success (a JSON body is the job's result),
// 429/503 with Retry-After = throttled, 5xx = retried, other 4xx = dead letter at once.
//
// Run:  MAILER_SECRET=... node http_handler.mjs [port]
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

const SECRET = process.env.MAILER_SECRET;
const REPLAY_WINDOW = 300; // seconds, as deck signs

// HMAC-SHA256 over "{timestamp}.{body}", compared in constant time, recent only.
function signedByDeck(headers, body) {
  const ts = headers["deck-timestamp"] ?? "";
  const given = Buffer.from(headers["deck-signature"] ?? "");
  const mac = createHmac("sha256", SECRET).update(`${ts}.`).update(body).digest("hex");
  const expected = Buffer.from(`v1=${mac}`);
  return (
    /^\d+$/.test(ts) &&
    Math.abs(Date.now() / 1000 - Number(ts)) <= REPLAY_WINDOW &&
    given.length === expected.length &&
    timingSafeEqual(given, expected)
  );
}

// Optional: progress shows in deck's console while this request is in flight.
async function reportProgress(job, percent, message) {
  if (!job.progress) return;
  const res = await fetch(job.progress.url, {
    method: "POST",
    headers: { "content-type": "application/json", "deck-progress-token": job.progress.token },
    body: JSON.stringify({ percent, message }),
  });
  if (res.status !== 204) throw new Error(`progress refused: ${res.status}`);
}

// Your code. Returns [status, result]; `job` is deck's envelope.
async function runJob(job) {
  const payload = job.payload ?? {};
  for (let step = 0; step < (payload.steps ?? 0); step++) {
    await reportProgress(job, Math.floor((100 * step) / payload.steps), `step ${step + 1}`);
  }
  if (payload.fail === "transient") return [503, { error: "mail server busy" }];
  if (!payload.to) return [422, { error: "no recipient (payload.to)" }];
  return [200, { sent_to: payload.to, attempt: job.attempt }];
}

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    const body = Buffer.concat(chunks);
    let status = 401;
    let result = { error: "bad or missing signature" };
    if (signedByDeck(req.headers, body)) {
      try {
        [status, result] = await runJob(JSON.parse(body));
      } catch (e) {
        [status, result] = [500, { error: String(e) }];
      }
    }
    console.error(`receiver: ${req.method} ${req.url} ${status}`);
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(result));
  });
});
server.listen(Number(process.argv[2] ?? 9000), "127.0.0.1");
