#!/usr/bin/env python3
"""A troupe client written from docs/protocol.md alone: plain ZeroMQ and msgpack, no troupe code.

Usage: foreign_client.py ENDPOINT TOKEN
Queries the head (hello, status), uses its key-value store, and checks that a bad token and an
unknown type are refused. Exits 0 when everything behaves as documented.
"""
import sys

import msgpack
import zmq

endpoint, token = sys.argv[1], sys.argv[2]
context = zmq.Context()
sock = context.socket(zmq.DEALER)
sock.setsockopt(zmq.LINGER, 0)
sock.setsockopt(zmq.RCVTIMEO, 5000)
sock.connect(endpoint)
corr = 0


def call(type_, payload):
    global corr
    corr += 1
    envelope = {"v": 4, "type": type_, "src": "python", "dst": "", "corr": corr, "epoch": 0,
                "payload": payload}
    sock.send(msgpack.packb(envelope, use_bin_type=True))
    while True:
        reply = msgpack.unpackb(sock.recv(), raw=False)
        if reply["corr"] == corr:
            return reply


def check(condition, what):
    if not condition:
        print("FAILED: " + what)
        sys.exit(1)


hello = call("hello", {})
check(hello["type"] == "hello" and hello["payload"]["version"] == 4, "hello")

status = call("status", {"token": token})
check(status["type"] == "status", "status: %r" % status)
members = status["payload"]["members"]
check(any(m["node"] == "head" and m["head"] for m in members), "the head is a member")
workers = [m for m in members if not m["head"] and m["state"] == "alive"]
check(len(workers) >= 1, "a live worker")
check(all("heartbeat_age_ms" in m and "resources" in m for m in members), "member fields")

check(call("kv.set", {"token": token, "key": "python/key", "value": b"\x00\x01"})["type"] == "kv.ok",
      "kv.set")
got = call("kv.get", {"token": token, "key": "python/key"})
check(got["type"] == "kv.value" and got["payload"]["value"] == b"\x00\x01", "kv.get")
check(call("kv.add", {"token": token, "key": "python/n", "delta": 5})["payload"]["value"] == 5, "kv.add")
waited = call("kv.wait", {"token": token, "key": "python/n", "timeout_ms": 1000})
check(waited["type"] == "kv.value" and waited["payload"]["value"] == b"5", "kv.wait on an existing key")
missing = call("kv.wait", {"token": token, "key": "python/never", "timeout_ms": 100})
check(missing["type"] == "error" and missing["payload"]["code"] == "DEADLINE_EXCEEDED", "kv.wait timeout")

denied = call("status", {"token": "wrong"})
check(denied["type"] == "error" and denied["payload"]["code"] == "PERMISSION_DENIED", "bad token refused")
unknown = call("teleport", {"token": token})
check(unknown["type"] == "error" and unknown["payload"]["code"] == "UNIMPLEMENTED", "unknown type refused")

print("ok: %d members, epoch %d" % (len(members), status["payload"]["epoch"]))
