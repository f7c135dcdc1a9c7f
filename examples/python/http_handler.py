#!/usr/bin/env python3
"""A deck HTTP handler in Python, standard library only.

deck POSTs each job of the types mapped to this URL (deck.toml):

    [[handlers]]
    types = ["email.*"]
    url = "http://127.0.0.1:9000/jobs"
    secret_env = "MAILER_SECRET"

The answer decides the outcome: 2xx = success (a JSON body is the job's result),
429/503 with Retry-After = throttled, 5xx = retried, other 4xx = dead letter at once.

Run:  MAILER_SECRET=... python3 http_handler.py [port]
"""
import hashlib
import hmac
import http.server
import json
import os
import sys
import time
import urllib.request

SECRET = os.environ["MAILER_SECRET"].encode()
REPLAY_WINDOW = 300  # seconds, as deck signs


def signed_by_deck(headers, body):
    """HMAC-SHA256 over "{timestamp}.{body}", compared in constant time, recent only."""
    ts = headers.get("Deck-Timestamp", "")
    given = headers.get("Deck-Signature", "")
    expected = "v1=" + hmac.new(SECRET, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    return (
        ts.isdigit()
        and abs(time.time() - int(ts)) <= REPLAY_WINDOW
        and hmac.compare_digest(expected, given)
    )


def report_progress(job, percent, message):
    """Optional: progress shows in deck's console while this request is in flight."""
    link = job.get("progress")
    if not link:
        return
    request = urllib.request.Request(
        link["url"],
        data=json.dumps({"percent": percent, "message": message}).encode(),
        headers={"Content-Type": "application/json", "Deck-Progress-Token": link["token"]},
        method="POST",
    )
    urllib.request.urlopen(request, timeout=5).close()


def run_job(job):
    """Your code. Return (status, result). `job` is deck's envelope."""
    payload = job["payload"] or {}
    for step in range(payload.get("steps", 0)):
        report_progress(job, int(100 * step / payload["steps"]), f"step {step + 1}")
    if payload.get("fail") == "transient":
        return 503, {"error": "mail server busy"}
    if "to" not in payload:
        return 422, {"error": "no recipient (payload.to)"}
    return 200, {"sent_to": payload["to"], "attempt": job["attempt"]}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not signed_by_deck(self.headers, body):
            return self.answer(401, {"error": "bad or missing signature"})
        status, result = run_job(json.loads(body))
        self.answer(status, result)

    def answer(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        sys.stderr.write("receiver: " + fmt % args + "\n")


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9000
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
