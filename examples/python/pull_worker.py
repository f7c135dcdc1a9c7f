#!/usr/bin/env python3
"""A deck external worker in Python, standard library only.

Over deck's worker protocol: a long-poll claim for as many jobs as there are free slots, a
thread per job, one heartbeat thread for the held jobs, then complete or fail. deck records
cancels and timeouts itself and says so in the heartbeat's answer: the worker only stops.

Run:  [DECK_TOKEN=...] python3 pull_worker.py [--url http://127.0.0.1:8080] [--worker NAME]
          [--types a,b] [--queues q] [--concurrency N]
"""
import argparse, json, os, signal, socket, threading, time, urllib.error, urllib.request


class Retry(Exception):
    """May succeed later: retried by the job's policy, not before retry_after_seconds (whole)."""
    def __init__(self, message, retry_after_seconds=None):
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class Fatal(Exception):
    """Can never succeed: to the dead-letter queue at once."""


# Your code: job type -> function(payload, job, report_progress) returning a JSON-able result.
def reverse(payload, job, report_progress):
    report_progress(50, "reversing")
    return {"reversed": payload["text"][::-1]}


def flaky(payload, job, report_progress):
    if job["attempt"] < 2:
        raise Retry("the downstream is busy", retry_after_seconds=1)
    return {"attempt": job["attempt"]}


def reject(payload, job, report_progress):
    raise Fatal("rejected by the example")


def slow(payload, job, report_progress):
    for _ in range(300):  # a cancel comes only through the heartbeat: check the flag often
        if job["abandoned"].is_set():
            return None
        time.sleep(0.1)
    return {"slept": 30}


HANDLERS = {"demo.reverse": reverse, "demo.flaky": flaky, "demo.reject": reject, "demo.slow": slow}


class Worker:
    def __init__(self, args):
        self.args, self.base = args, args.url.rstrip("/") + "/api/v1/workers"
        self.headers = {"Content-Type": "application/json"}
        if os.environ.get("DECK_TOKEN"):
            self.headers["Authorization"] = "Bearer " + os.environ["DECK_TOKEN"]
        self.held = {}  # job id -> job; its "abandoned" flag: stop it, report nothing
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.beat_every = 1.0  # until a claim says how often deck wants heartbeats

    def post(self, path, body):
        """POST JSON; (status, answer). A 409 (lease_lost) is an answer: the job is not ours."""
        data = json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data, self.headers, method="POST")
        try:  # the timeout outlasts the longest claim wait (30 s)
            with urllib.request.urlopen(req, timeout=60) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            if e.code != 409:
                raise
            return 409, json.loads(e.read())

    def run(self):
        threading.Thread(target=self.heartbeat, daemon=True).start()
        a = self.args
        while not self.stopping.is_set():
            free = a.concurrency - len(self.held)
            if free <= 0:  # every slot busy: claim again when a job ends
                time.sleep(0.05)
                continue
            body = {"worker": a.worker, "limit": free, "wait_seconds": 20,
                    "types": a.types.split(","), "queues": a.queues.split(",") if a.queues else None,
                    "concurrency": a.concurrency, "host": socket.gethostname(), "pid": os.getpid(),
                    "agent": "python-example/1"}
            try:
                _, claim = self.post("/claim", body)
            except OSError as e:  # deck restarting or unreachable: try again shortly
                print("claim failed:", e, flush=True)
                time.sleep(1)
                continue
            self.beat_every = max(0.5, claim["heartbeat_seconds"] / 2)
            for job in claim["jobs"]:
                job["abandoned"] = threading.Event()
                with self.lock:
                    self.held[job["id"]] = job
                threading.Thread(target=self.execute, args=(job,), daemon=True).start()
        while self.held:  # stopping: running jobs finish (if killed first, deck rescues them)
            time.sleep(0.1)

    def execute(self, job):
        jid, lease = job["id"], job["lease"]

        def report_progress(percent, message=""):
            body = {"lease": lease, "percent": percent, "message": message}
            if self.post(f"/jobs/{jid}/progress", body)[0] == 409:  # not ours any more
                job["abandoned"].set()

        path, report = "complete", {"lease": lease}
        try:
            if self.stopping.is_set():  # claimed after SIGTERM: give it back unrun
                path = "release"
            elif job["type"] not in HANDLERS:
                raise Fatal(f"this worker has no handler for {job['type']}")
            else:
                report["result"] = HANDLERS[job["type"]](job["payload"], job, report_progress)
        except Retry as e:
            path = "fail"
            report.update(message=str(e), kind="Retry", retry_after_seconds=e.retry_after_seconds)
        except Fatal as e:
            path = "fail"
            report.update(message=str(e), kind="Fatal", fatal=True)
        except Exception as e:  # unexpected, maybe passing: the job's retry policy decides
            path = "fail"
            report.update(message=repr(e), kind=type(e).__name__)
        try:
            if not job["abandoned"].is_set():  # a stopped job's outcome is already recorded
                _, answer = self.post(f"/jobs/{jid}/{path}", report)
                print(job["type"], jid, answer.get("outcome") or answer["error"]["code"], flush=True)
        except OSError as e:  # unreported: deck's timeouts rescue the job later
            print(job["type"], jid, path, "failed:", e, flush=True)
        finally:
            with self.lock:
                self.held.pop(jid, None)

    def heartbeat(self):
        while True:
            time.sleep(self.beat_every)
            by_lease = {}
            with self.lock:
                for job in self.held.values():
                    by_lease.setdefault(job["lease"], []).append(job["id"])
            for lease, ids in by_lease.items():
                try:
                    _, beat = self.post("/heartbeat", {"lease": lease, "jobs": ids})
                except OSError as e:  # one missed beat is fine: deck waits for several
                    print("heartbeat failed:", e, flush=True)
                    continue
                with self.lock:  # cancelled, timed out or rescued: stop them, report nothing
                    for jid in [s["id"] for s in beat["stop"]] + beat["lost"]:
                        if jid in self.held:
                            self.held[jid]["abandoned"].set()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="A deck external worker.")
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("--worker", default=f"py-{socket.gethostname()}")
    p.add_argument("--types", default=",".join(HANDLERS))  # never claim a type it cannot run
    p.add_argument("--queues", default="")
    p.add_argument("--concurrency", type=int, default=4)
    worker = Worker(p.parse_args())
    # Stop claiming; the claim in flight ends within its wait, and its jobs are released.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stopping.set())
    worker.run()
