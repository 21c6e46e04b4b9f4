#!/usr/bin/env python3
"""Measures a running `baton serve` (started by bench/serve.sh): page and API times, the
latency from an audit line appended to an SSE client receiving it, and the server's RSS idle
and with 50 open SSE streams. Standard library only."""

import argparse
import datetime
import glob
import http.client
import json
import os
import socket
import statistics
import time
import urllib.parse

WARMUP = 5
MEASURED = 50
PINGS = 50
STREAMS = 50


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def timed_get(conn, path, headers):
    """Time from sending the request to the last byte of the body (keep-alive connection)."""
    start = time.perf_counter()
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    elapsed = (time.perf_counter() - start) * 1000
    if resp.status != 200:
        raise RuntimeError(f"GET {path}: {resp.status} {body[:300]!r}")
    return elapsed, body


def series(conn, path, headers):
    for _ in range(WARMUP):
        timed_get(conn, path, headers)
    times = []
    size = 0
    for _ in range(MEASURED):
        ms, body = timed_get(conn, path, headers)
        times.append(ms)
        size = len(body)
    times.sort()
    return {
        "path": path,
        "medianMs": round(statistics.median(times), 2),
        "p95Ms": round(times[int(len(times) * 0.95) - 1], 2),
        "bytes": size,
    }


def open_stream(port, token, run_id):
    """An SSE request on a raw socket; returns the socket once the headers are read."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        (
            f"GET /api/runs/{run_id}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the SSE stream closed before its headers")
        head += chunk
    status = head.split(b"\r\n", 1)[0]
    if b" 200" not in status:
        raise RuntimeError(f"SSE: {status!r}")
    return sock, head.split(b"\r\n\r\n", 1)[1]


def read_until(sock, buffered, marker, deadline):
    data = buffered
    while marker not in data:
        sock.settimeout(max(0.001, deadline - time.perf_counter()))
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the SSE stream closed")
        data += chunk
    return data[data.index(marker) + len(marker):]


def sse_latency(port, token, run_id, audit):
    sock, buffered = open_stream(port, token, run_id)
    # Let the stream send the lines already in the log.
    time.sleep(0.5)
    sock.settimeout(0.2)
    try:
        while True:
            if not sock.recv(1 << 20):
                break
    except socket.timeout:
        pass
    buffered = b""
    times = []
    for seq in range(PINGS):
        marker = f"bench-ping-{seq}-{os.getpid()}"
        line = json.dumps(
            {
                "ts": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "kind": "bench.ping",
                "runId": run_id,
                "note": marker,
            }
        )
        start = time.perf_counter()
        # One write of a whole line, as the engine appends.
        with open(audit, "a") as f:
            f.write(line + "\n")
        buffered = read_until(sock, buffered, marker.encode(), start + 5)
        times.append((time.perf_counter() - start) * 1000)
        # Spread the appends over the server's polling period.
        time.sleep(0.013 * (1 + seq % 7))
    sock.close()
    times.sort()
    return {
        "medianMs": round(statistics.median(times), 2),
        "p95Ms": round(times[int(len(times) * 0.95) - 1], 2),
        "maxMs": round(times[-1], 2),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--home", required=True)
    ap.add_argument("--project", required=True)
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--demo", required=True)
    args = ap.parse_args()

    with open(args.serve) as f:
        serve = json.loads(f.readline())
    token, port = serve["token"], int(serve["port"])
    with open(args.demo) as f:
        demo_run = json.load(f)["runId"]
    audit = glob.glob(f"{args.home}/projects/*/runs/{demo_run}/state/logs/execution.jsonl")[0]

    idle_start = rss_kib(args.pid)
    auth = {"Authorization": f"Bearer {token}"}
    project = urllib.parse.quote(os.path.realpath(args.project), safe="")
    results = {"runs": args.runs}
    results["sse"] = sse_latency(port, token, demo_run, audit)

    streams = [open_stream(port, token, demo_run) for _ in range(STREAMS)]
    time.sleep(2)
    results["rss50StreamsKiB"] = rss_kib(args.pid)
    # One appended line reaches every stream.
    marker = f"bench-fanout-{os.getpid()}"
    start = time.perf_counter()
    with open(audit, "a") as f:
        f.write(json.dumps({"ts": "2026-11-22T00:00:00Z", "kind": "bench.ping", "runId": demo_run, "note": marker}) + "\n")
    for sock, buffered in streams:
        read_until(sock, buffered, marker.encode(), start + 10)
    results["fanout50Ms"] = round((time.perf_counter() - start) * 1000, 2)
    streams = [sock for sock, _ in streams]
    # The server still answers with the streams open.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    results["apiWith50Streams"] = series(conn, f"/api/runs?project={project}&limit=50", auth)
    conn.close()
    results["rss50StreamsAfterRequestsKiB"] = rss_kib(args.pid)
    for s in streams:
        s.close()

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    # The very first request after start (nothing cached by the OS or the server yet).
    cold_ms, _ = timed_get(conn, f"/?project={project}", auth)
    results["pageColdMs"] = round(cold_ms, 2)
    results["page"] = series(conn, f"/?project={project}", auth)
    results["pageAll"] = series(conn, "/", auth)
    results["api"] = series(conn, f"/api/runs?project={project}&limit=50", auth)
    _, body = timed_get(conn, f"/api/runs?project={project}&limit=50", auth)
    first = json.loads(body)
    if len(first["runs"]) != 50 or not first.get("nextCursor"):
        raise RuntimeError(f"the API listed {len(first['runs'])} runs, nextCursor {first.get('nextCursor')}")
    _, page = timed_get(conn, f"/?project={project}", auth)
    rows = page.count(b"data-run-id=")
    if rows != 50:
        raise RuntimeError(f"the runs page shows {rows} rows")
    cursor = urllib.parse.quote(first["nextCursor"], safe="")
    # The filtered and later pages walk the index past the newest runs.
    results["pageOlder"] = series(conn, f"/?project={project}&cursor={cursor}", auth)
    results["pagePhase"] = series(conn, f"/?project={project}&phase=waiting-user", auth)
    results["pageWorkflow"] = series(conn, f"/?project={project}&workflow=nonexistent", auth)
    results["apiOlder"] = series(conn, f"/api/runs?project={project}&limit=50&cursor={cursor}", auth)
    conn.close()
    results["rssIdleKiB"] = {"afterStart": idle_start, "afterRequests": rss_kib(args.pid)}

    print(json.dumps(results, indent=2))
    p, a, s = results["page"], results["api"], results["sse"]
    print(
        f"\nruns page ({args.runs} runs, one project): median {p['medianMs']} ms, p95 {p['p95Ms']} ms, "
        f"{p['bytes']} bytes; first request after start {results['pageColdMs']} ms\n"
        f"runs page (all projects): median {results['pageAll']['medianMs']} ms\n"
        f"runs page, second page (cursor): median {results['pageOlder']['medianMs']} ms; "
        f"phase filter: {results['pagePhase']['medianMs']} ms; "
        f"workflow filter matching nothing: {results['pageWorkflow']['medianMs']} ms\n"
        f"GET /api/runs second page: median {results['apiOlder']['medianMs']} ms\n"
        f"GET /api/runs limit 50: median {a['medianMs']} ms, p95 {a['p95Ms']} ms\n"
        f"audit line -> SSE client: median {s['medianMs']} ms, p95 {s['p95Ms']} ms, max {s['maxMs']} ms; "
        f"one line to all {STREAMS} streams: {results['fanout50Ms']} ms\n"
        f"RSS: {idle_start / 1024:.1f} MiB idle after start; with {STREAMS} open SSE streams "
        f"{results['rss50StreamsKiB'] / 1024:.1f} MiB "
        f"({results['rss50StreamsAfterRequestsKiB'] / 1024:.1f} MiB after {MEASURED + WARMUP} API lists "
        f"through them); after all the page and API requests {results['rssIdleKiB']['afterRequests'] / 1024:.1f} MiB"
    )


if __name__ == "__main__":
    main()
