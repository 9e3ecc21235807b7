#!/usr/bin/env python3
"""Chaos soak of serving (docs/reliability.md).

Runs `troupe launch configs/serve_tiny.yaml` with 3 local workers under steady load from N
clients (streamed and whole completions, fixed seeds), first for a calm baseline, then while a
random worker is killed (SIGKILL, or SIGSTOP until the head declares it dead) every few seconds
and a replacement joins with `troupe worker --join`. Then it checks:

- every accepted request (HTTP 200) was answered completely and exactly once: each answer is
  compared with the same request (prompt, seed) asked again once the chaos is over, so a stream
  with a gap or a repeated token, or a cut answer, shows as a mismatch;
- the KV cache blocks are back to 0 and nothing is in flight;
- after Ctrl-C, no process of the job is left.

Prints one JSON line of figures and exits 1 when an invariant broke. Stdlib only.

    scripts/chaos_serve.py --minutes 10                 # the soak of docs/reliability.md
    scripts/chaos_serve.py --kills 3 --clients 8        # the shortened run of ChaosServeTest
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--troupe", default=os.path.join(ROOT, "build", "troupe"))
    p.add_argument("--minutes", type=float, default=0, help="chaos phase length (0: until --kills)")
    p.add_argument("--kills", type=int, default=0, help="stop after this many kills (0: none)")
    p.add_argument("--kill-every", type=float, default=4.0, help="seconds between kills")
    p.add_argument("--baseline-seconds", type=float, default=20.0, help="calm phase first")
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--run-dir", default="")
    args = p.parse_args()
    if args.minutes <= 0 and args.kills <= 0:
        p.error("give --minutes or --kills")
    return args


def wait_for(what, check, limit):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"chaos_serve: {what} did not happen within {limit} s")


def event(run_dir, name):
    try:
        with open(os.path.join(run_dir, "events.jsonl")) as f:
            for line in f:
                e = json.loads(line)
                if e.get("event") == name:
                    return e
    except (OSError, ValueError):
        return None
    return None


class Serve:
    def __init__(self, port):
        self.port = port

    def connection(self, timeout=120):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def metric(self, series):
        try:
            c = self.connection(10)
            c.request("GET", "/metrics")
            text = c.getresponse().read().decode()
            c.close()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(series + " "):
                return float(line.split()[1])
        return None

    def complete(self, body):
        """One completion: (status, text, finish_reason, error). Streams are read to [DONE]."""
        c = self.connection()
        try:
            c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                r.read()
                return r.status, None, None, None
            if not body.get("stream"):
                choice = json.loads(r.read())["choices"][0]
                return 200, choice["text"], choice["finish_reason"], None
            text, reason, done = [], None, False
            for raw in r:
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    done = True
                    break
                choice = json.loads(data)["choices"][0]
                text.append(choice.get("text", ""))
                reason = choice.get("finish_reason") or reason
            if not done:
                return 200, "".join(text), reason, "the stream ended without [DONE]"
            return 200, "".join(text), reason, None
        except (OSError, ValueError, http.client.HTTPException) as e:
            return 200, None, None, f"{type(e).__name__}: {e}"
        finally:
            c.close()


def percentile(values, q):
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 4)


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="troupe-chaos-")
    launch = subprocess.Popen(
        [args.troupe, "launch", os.path.join(ROOT, "configs/serve_tiny.yaml"), "--run-dir", run_dir,
         "--set", "serve.port=0", "--set", f"cluster.local_workers={args.workers}"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(tempfile.gettempdir(), f"chaos-launch-{os.getpid()}.log"), "w"))
    pids = {launch.pid}
    joined = []  # replacement workers
    figures = {"kills": 0, "sigkill": 0, "sigstop": 0, "joins": 0}
    try:
        serving = wait_for("serving", lambda: event(run_dir, "serving"), 120)
        head = wait_for("cluster_ready", lambda: event(run_dir, "cluster_ready"), 120)["head"]
        serve = Serve(serving["port"])
        wait_for(f"{args.workers} workers", lambda: serve.metric("troupe_serve_workers") == args.workers, 120)

        def live_workers():
            r = subprocess.run([args.troupe, "status", "--head", head, "--json"], capture_output=True, text=True, timeout=30)
            try:
                members = json.loads(r.stdout).get("members", [])
            except ValueError:
                return []
            return [m for m in members if not m.get("head") and m.get("state") == "alive"]

        for m in live_workers():
            pids.add(m["pid"])

        phase = {"name": "baseline"}
        results = []  # (phase, body, status, text, reason, error, latency)
        lock = threading.Lock()
        stop = threading.Event()

        def client(k):
            n = 0
            while not stop.is_set():
                body = {"model": "troupe-tiny", "prompt": f"client {k} request {n}: ",
                        "max_tokens": args.max_tokens, "seed": 1000 * k + n + 1,
                        "temperature": 0.8, "stream": n % 2 == 0}
                started = time.monotonic()
                status, text, reason, error = serve.complete(body)
                with lock:
                    results.append((phase["name"], body, status, text, reason, error, time.monotonic() - started))
                n += 1

        clients = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(args.clients)]
        for t in clients:
            t.start()
        time.sleep(args.baseline_seconds)  # the calm phase's length, not a wait for an event

        phase["name"] = "chaos"
        chaos_until = time.monotonic() + 60 * args.minutes if args.minutes > 0 else None
        stopped = []  # SIGSTOPped workers, killed once declared dead
        while (chaos_until is None or time.monotonic() < chaos_until) and (args.kills <= 0 or figures["kills"] < args.kills):
            time.sleep(args.kill_every)  # the chaos's pace
            live = wait_for(f"{args.workers} live workers", lambda: (lambda w: w if len(w) >= args.workers else None)(live_workers()), 120)
            victim = rng.choice(live)
            how = rng.choice([signal.SIGKILL, signal.SIGSTOP])
            os.kill(victim["pid"], how)
            figures["kills"] += 1
            figures["sigkill" if how == signal.SIGKILL else "sigstop"] += 1
            if how == signal.SIGSTOP:
                stopped.append(victim)
            w = subprocess.Popen([args.troupe, "worker", "--join", head], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            joined.append(w)
            pids.add(w.pid)
            figures["joins"] += 1
            for s in list(stopped):  # a frozen worker declared dead is gone for good
                if not any(m["node"] == s["node"] for m in live_workers()):
                    os.kill(s["pid"], signal.SIGKILL)
                    stopped.remove(s)
        stop.set()
        for t in clients:
            t.join(300)
        for s in stopped:
            os.kill(s["pid"], signal.SIGKILL)

        # Every accepted answer against the same request asked again, calmly (by as many clients).
        accepted = [r for r in results if r[2] == 200]
        refused = len(results) - len(accepted)
        errors = [{"body": r[1], "error": r[5]} for r in accepted if r[5]]

        def check(r):
            _, body, _, text, reason, error, _ = r
            if error:
                return None
            s2, text2, reason2, e2 = serve.complete(dict(body, stream=False))
            if s2 != 200 or e2 or text2 != text or reason2 != reason:
                return {"body": body, "got": text, "reason": reason, "again": text2, "again_reason": reason2}
            return None

        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            mismatches = [m for m in pool.map(check, accepted) if m]
        wait_for("an idle server", lambda: serve.metric("troupe_serve_in_flight") == 0 and serve.metric("troupe_serve_queue_depth") == 0, 60)
        kv_blocks = serve.metric("troupe_serve_kv_blocks_in_use")
        latency = {ph: [r[6] for r in results if r[0] == ph and r[2] == 200 and not r[5]] for ph in ("baseline", "chaos")}
        figures.update({
            "requests": len(results), "accepted": len(accepted), "refused": refused,
            "replays": serve.metric("troupe_serve_replays_total"),
            "errors": len(errors), "mismatches": len(mismatches), "kv_blocks_in_use_after": kv_blocks,
            "p50_s_baseline": percentile(latency["baseline"], 0.5), "p99_s_baseline": percentile(latency["baseline"], 0.99),
            "p50_s_chaos": percentile(latency["chaos"], 0.5), "p99_s_chaos": percentile(latency["chaos"], 0.99),
            "requests_baseline": len(latency["baseline"]), "requests_chaos": len(latency["chaos"]),
            "clients": args.clients, "chaos_seconds": round(60 * args.minutes) if args.minutes > 0 else None,
        })
        for what, items in (("error", errors), ("mismatch", mismatches)):
            for item in items[:5]:
                print(f"chaos_serve: {what}: {json.dumps(item)}", file=sys.stderr)
    finally:
        launch.send_signal(signal.SIGINT)
        try:
            launch.wait(60)
        except subprocess.TimeoutExpired:
            launch.kill()
        for w in joined:
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
        time.sleep(0.5)  # let the kernel reap the workers the launch started

    left = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] != "Z":
                    left.append(pid)
        except (OSError, IndexError):
            pass
    figures["processes_left"] = len(left)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    print(json.dumps(figures))
    ok = figures["errors"] == 0 and figures["mismatches"] == 0 and figures["kv_blocks_in_use_after"] == 0 and not left
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
