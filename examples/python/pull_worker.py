#!/usr/bin/env python3
"""A deck external worker in Python, standard library only.

It pulls jobs over deck's worker protocol: claim (long-poll), heartbeat, progress,
complete / fail. Each job runs in a thread; one heartbeat thread keeps every held job alive
and stops the ones deck says to stop (an operator cancel, the execution timeout).

Run:  DECK_TOKEN=... python3 pull_worker.py --url http://127.0.0.1:8080 --worker py-1 \
          [--types demo.reverse,demo.flaky] [--queues default] [--concurrency 4]
"""
import argparse, json, os, signal, socket, threading, time, urllib.error, urllib.request


class Retry(Exception):
    """May succeed later: deck retries it by the job's policy (not before retry_after)."""
    def __init__(self, message, retry_after_seconds=None):
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class Fatal(Exception):
    """Can never succeed: straight to the dead-letter queue."""


def reverse(payload, job, progress):
    progress(50, "reversing")
    return {"reversed": payload["text"][::-1]}


def flaky(payload, job, progress):
    if job["attempt"] < 2:
        raise Retry("the downstream is busy", retry_after_seconds=1)
    return {"attempt": job["attempt"]}


def reject(payload, job, progress):
    raise Fatal("rejected by the example")


def slow(payload, job, progress):
    for _ in range(300):  # up to 30 s, in steps short enough to notice a stop quickly
        if job["stop"].is_set():
            return None
        time.sleep(0.1)
    return {"slept": 30}


HANDLERS = {"demo.reverse": reverse, "demo.flaky": flaky, "demo.reject": reject, "demo.slow": slow}


class Deck:
    def __init__(self, url, token):
        self.url, self.token = url.rstrip("/") + "/api/v1/workers", token

    def post(self, path, body, timeout=60):
        """POST JSON; returns (status, answer). 409 lease_lost is an answer, not an error."""
        req = urllib.request.Request(self.url + path, json.dumps(body).encode(), method="POST")
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            if e.code == 409:
                return 409, json.loads(e.read())
            raise


class Worker:
    def __init__(self, deck, args):
        self.deck, self.args = deck, args
        self.held = {}  # job id -> job (with its lease and a stop flag)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.beat_every = 5

    def run(self):
        threading.Thread(target=self.heartbeat, daemon=True).start()
        while not self.stopping.is_set():
            with self.lock:
                free = self.args.concurrency - len(self.held)
            if free <= 0:
                time.sleep(0.05)
                continue
            body = {"worker": self.args.worker, "limit": free, "wait_seconds": 5,
                    "concurrency": self.args.concurrency, "host": socket.gethostname(),
                    "pid": os.getpid(), "agent": "python-example/1"}
            if self.args.types:
                body["types"] = self.args.types.split(",")
            if self.args.queues:
                body["queues"] = self.args.queues.split(",")
            try:
                _, claim = self.deck.post("/claim", body)
            except OSError as e:  # deck restarting or unreachable: try again shortly
                print("claim failed:", e, flush=True)
                time.sleep(1)
                continue
            self.beat_every = max(1, claim["heartbeat_seconds"] // 2)
            for job in claim["jobs"]:
                job["stop"] = threading.Event()
                with self.lock:
                    self.held[job["id"]] = job
                threading.Thread(target=self.execute, args=(job,), daemon=True).start()
        # Stopping: running jobs finish (a job not finished by the grace time is rescued).
        while self.held:
            time.sleep(0.1)

    def execute(self, job):
        jid, lease = job["id"], job["lease"]
        progress = lambda pct, msg="": self.deck.post(
            f"/jobs/{jid}/progress", {"lease": lease, "percent": pct, "message": msg})
        try:
            handler = HANDLERS.get(job["type"])
            if handler is None:
                raise Fatal(f"this worker has no handler for {job['type']}")
            path, report = "/complete", {"lease": lease, "result": handler(job["payload"], job, progress)}
        except Retry as e:
            path, report = "/fail", {"lease": lease, "message": str(e), "kind": "Retry",
                                     "retry_after_seconds": e.retry_after_seconds}
        except Fatal as e:
            path, report = "/fail", {"lease": lease, "message": str(e), "kind": "Fatal", "fatal": True}
        except Exception as e:  # anything unexpected may be passing: let the policy retry
            path, report = "/fail", {"lease": lease, "message": str(e), "kind": type(e).__name__}
        try:
            if not job["stop"].is_set():  # a stopped job's outcome is already recorded
                status, answer = self.deck.post(f"/jobs/{jid}{path}", report)
                print(job["type"], jid, status, answer.get("outcome") or answer["error"]["code"], flush=True)
        finally:
            with self.lock:
                self.held.pop(jid, None)

    def heartbeat(self):
        while True:
            time.sleep(self.beat_every)
            with self.lock:
                by_lease = {}
                for job in self.held.values():
                    by_lease.setdefault(job["lease"], []).append(job["id"])
            for lease, ids in by_lease.items():
                try:
                    _, beat = self.deck.post("/heartbeat", {"lease": lease, "jobs": ids})
                except OSError as e:
                    print("heartbeat failed:", e, flush=True)
                    continue
                gone = [s["id"] for s in beat["stop"]] + beat["lost"]
                with self.lock:
                    for jid in gone:  # cancelled, timed out or rescued: stop, report nothing
                        if jid in self.held:
                            self.held[jid]["stop"].set()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("--worker", default=f"py-{socket.gethostname()}")
    p.add_argument("--types", default="")
    p.add_argument("--queues", default="")
    p.add_argument("--concurrency", type=int, default=4)
    worker = Worker(Deck(p.parse_args().url, os.environ.get("DECK_TOKEN")), p.parse_args())
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stopping.set())
    worker.run()


if __name__ == "__main__":
    main()
