#!/usr/bin/env python3
"""Soak `am serve mock:PROFILE` under a mixed load and watch its resident memory.

Usage: scripts/soak.py [--am PATH] [--minutes N] [--profile navi31] [--out FILE]

Well-behaved clients run `am init`, `am info`, `am smi` and `am run` (a saxpy kernel
compiled with `am compile`) against the served mock in a loop, a raw client pings and
reads registers, and another maps --sysmem-mib of system memory (MAP_SYSMEM), writes
into it, holds it a moment and disconnects. Hostile clients at the same time: one floods
requests the mock refuses (a register of no IP block), one sends random headers with
junk payloads, one holds a connection with half a header, one holds an idle connection;
and the patterns of issue 40 that held places before the server measured progress: four
clients that only ping, two that dribble request headers (each within the read timeout,
none within a second), three idle clients that reconnect the moment they are closed, and
one that maps 32 MiB on a second served device and trickles a SYSMEM_WRITE of all of it a
byte every half second. The hostile clients come from 127.0.0.2 and 127.0.0.3, so that
the per-address cap (8) does not keep the well-behaved ones on 127.0.0.1 out; with all of
them the server's 16 places are over-subscribed, and the well-behaved clients get in by
the admission rule (our client waits the time a full server names).
Every --sample-secs the server's memory (VmRSS + VmSwap) is sampled; once the clients
have stopped, it is sampled again after --idle-secs.

The result is flat when the memory once idle is within --tolerance-mib of the memory
after the first minute (the warm-up: the first boots fault in the mock's VRAM pages and
firmware). Exits 1 if it is not, or if a well-behaved client failed. Figures go to stdout
(and --out as JSON); docs/RELIABILITY.md records the runs.
"""

import argparse
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

REQ = struct.Struct("<BIIQQQ")
RESP = struct.Struct("<BQQ")
PING, CFG_READ, MMIO_READ, MAP_SYSMEM, SYSMEM_WRITE = 12, 3, 6, 8, 10

# Where the hostile clients connect from (loopback, as separate peers).
HOSTILE_A, HOSTILE_B = "127.0.0.2", "127.0.0.3"

SAXPY = """kernel saxpy(%x: ptr<global, f32> noalias, %y: ptr<global, f32>, %a: f32, %n: u32) workgroup(64, 1, 1) {
  %g = group_id x
  %l = local_id x
  %w = const u32 64
  %b = mul %g, %w
  %i = add %b, %l
  %in = lt %i, %n
  if %in {
    %xv = load %x[%i] : f32
    %yv = load %y[%i] : f32
    %r = fma %a, %xv, %yv
    store %y[%i], %r
  }
}
"""


def rss_kib(pid):
    """Resident plus swapped-out memory: a host that reclaims idle pages (DAMON, zswap)
    moves RSS without the process freeing anything."""
    total = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmSwap:")):
                total += int(line.split()[1])
    return total


def connect(port, source="127.0.0.1"):
    s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        part = s.recv(n - len(buf))
        if not part:
            raise ConnectionError("closed")
        buf += part
    return buf


def answer(s, data_len=0):
    status, v0, v1 = RESP.unpack(recv_exact(s, RESP.size))
    if status != 0:
        return False, recv_exact(s, v0)
    return True, recv_exact(s, data_len) if data_len else b""


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = {}

    def add(self, key, n=1):
        with self.lock:
            self.c[key] = self.c.get(key, 0) + n


def hostile_flood(port, stop, n):
    # MMIO_READ of BAR5 dword 0x3ffff: in no IP segment, refused and recorded by the mock.
    while not stop.is_set():
        try:
            s = connect(port, HOSTILE_A)
            while not stop.is_set():
                s.sendall(REQ.pack(MMIO_READ, 0, 5, 0x3FFFF * 4, 4, 0))
                ok, _ = answer(s, 4)
                n.add("flood refused" if not ok else "flood answered")
        except OSError:
            n.add("flood reconnects")
            time.sleep(0.05)


def hostile_junk(port, stop, n, seed):
    rng = random.Random(seed)
    while not stop.is_set():
        try:
            s = connect(port, HOSTILE_A)
            s.settimeout(2)
            for _ in range(50):
                # Reads of device 0 with wild arguments, anything to devices that do not
                # exist, unknown commands: what a broken or hostile client sends that the
                # server must refuse. (A valid write or reset of device 0 is the client's
                # right and would break the well-behaved clients, so it is not sent.)
                dev = rng.choice([0, 0, 1, 7, 2**32 - 1])
                if dev == 0:
                    cmd = rng.choice([0, 1, 3, 6, 8, 9, 12, 0x80, rng.randrange(13, 0x80), rng.randrange(0x81, 256)])
                else:
                    cmd = rng.randrange(256)
                args = [rng.choice([0, 1, 4, 0x1000, 2**32, 2**63, rng.getrandbits(64)]) for _ in range(3)]
                s.sendall(REQ.pack(cmd, dev, rng.randrange(8), *args) + os.urandom(rng.randrange(64)))
                n.add("junk sent")
        except OSError:
            n.add("junk closed")
        finally:
            try:
                s.close()
            except Exception:
                pass


def hostile_holder(port, stop, n, half):
    while not stop.is_set():
        try:
            s = connect(port, HOSTILE_A)
            s.settimeout(120)
            if half:
                s.sendall(REQ.pack(PING, 0, 0, 0, 0, 0)[:11])
            # Wait until the server hangs up on us (read or idle timeout), then come back.
            while s.recv(4096):
                pass
            n.add("half header cut off" if half else "idle cut off")
        except OSError:
            n.add("holder errors")
        time.sleep(0.1)


def hostile_pinger(port, stop, n):
    """Only PINGs, one a second (inside any idle timeout): no progress, so its place goes to
    a newcomer once the server is full."""
    while not stop.is_set():
        try:
            s = connect(port, HOSTILE_A)
            s.settimeout(30)
            while not stop.is_set():
                s.sendall(REQ.pack(PING, 0, 0, 0, 0, 0))
                ok, _ = answer(s)
                if not ok:
                    break
                n.add("pings")
                stop.wait(1)
            n.add("pinger closed")
        except OSError:
            n.add("pinger closed")
        stop.wait(0.1)


def hostile_dribbler(port, stop, n):
    """CFG_READ headers a few bytes at a time, each whole within the read timeout (5 s) but
    none within a second: no progress."""
    while not stop.is_set():
        try:
            s = connect(port, HOSTILE_B)
            s.settimeout(30)
            while not stop.is_set():
                head = REQ.pack(CFG_READ, 0, 0, 0, 4, 0)
                for i in range(0, len(head), 4):
                    s.sendall(head[i:i + 4])
                    time.sleep(0.3)
                ok, _ = answer(s)
                if not ok:
                    break
                n.add("dribbled headers")
            n.add("dribbler closed")
        except OSError:
            n.add("dribbler closed")
        stop.wait(0.1)


def hostile_reconnector(port, stop, n):
    """Idle, and back the moment it is closed."""
    while not stop.is_set():
        try:
            s = connect(port, HOSTILE_B)
            s.settimeout(60)
            while not stop.is_set() and s.recv(4096):
                pass
            n.add("reconnects")
            s.close()
        except OSError:
            n.add("reconnects")


def hostile_trickler(port, stop, n):
    """Maps 32 MiB on device 1 (it becomes that device's owner) and trickles a SYSMEM_WRITE
    of all of it, a byte every half second."""
    size = 32 << 20
    while not stop.is_set():
        try:
            s = connect(port, HOSTILE_B)
            s.settimeout(30)
            s.sendall(REQ.pack(MAP_SYSMEM, 1, 0, size, 0, 0))
            ok, _ = answer(s, size // 4096 * 8)
            if not ok:
                n.add("trickler refused")
                s.close()
                stop.wait(1)
                continue
            s.sendall(REQ.pack(SYSMEM_WRITE, 1, 0, 0, size, 0))
            while not stop.is_set():
                s.sendall(b"\x5a")
                n.add("trickled bytes")
                stop.wait(0.5)
        except OSError:
            n.add("trickler cut off")
        stop.wait(0.1)


def good_raw(port, stop, n):
    while not stop.is_set():
        try:
            s = connect(port)
            s.sendall(REQ.pack(PING, 0, 0, 0, 0, 0))
            ok, msg = answer(s)
            if not ok and b"its limit" in msg:
                n.add("good raw turned away at the limit")
                time.sleep(0.2)
                continue
            for _ in range(200):
                s.sendall(REQ.pack(PING, 0, 0, 0, 0, 0))
                ok, _ = answer(s)
                s.sendall(REQ.pack(MMIO_READ, 0, 5, 0xDE3 * 4, 4, 0))  # RCC_CONFIG_MEMSIZE
                ok2, _ = answer(s, 4)
                n.add("good raw ok" if ok and ok2 else "good raw FAILED")
            s.close()
        except OSError as e:
            n.add("good raw FAILED")
            print(f"good raw client: {e}", file=sys.stderr)
            time.sleep(0.5)


def good_sysmem(port, stop, n, mib):
    """A large MAP_SYSMEM client: map, write a MiB every 16 MiB, hold, leave."""
    size = mib << 20
    while not stop.is_set():
        try:
            s = connect(port)
            s.settimeout(30)
            s.sendall(REQ.pack(MAP_SYSMEM, 0, 0, size, 0, 0))
            ok, msg = answer(s, size // 4096 * 8)
            if not ok:
                if b"limit" in msg:
                    n.add("sysmem turned away")
                elif b"is owned by" in msg:
                    # MAP_SYSMEM lets the device write the host: only its owner may map.
                    n.add("sysmem refused: the device had another owner")
                else:
                    n.add("sysmem FAILED")
                    print(f"sysmem client: {msg[:200]!r}", file=sys.stderr)
                s.close()
                time.sleep(1)
                continue
            # A fresh connection's first handle is 0.
            for off in range(0, size, 16 << 20):
                s.sendall(REQ.pack(SYSMEM_WRITE, 0, 0, off, 1 << 20, 0) + os.urandom(1 << 20))
            s.sendall(REQ.pack(PING, 0, 0, 0, 0, 0))
            ok, _ = answer(s)
            n.add("sysmem ok" if ok else "sysmem FAILED")
            stop.wait(2)
            s.close()
        except OSError as e:
            n.add("sysmem FAILED")
            print(f"sysmem client: {e}", file=sys.stderr)
        stop.wait(1)


def good_tools(am, spec, stop, n, failures, hsaco):
    cmds = [["init", spec], ["info", spec], ["smi", spec]]
    if hsaco:
        cmds.append(["run", spec, hsaco, "saxpy", "--grid", "16", "--block", "64",
                     "--arg", "buf:4096:iota=f32", "--arg", "buf:4096:fill=0x3f800000",
                     "--arg", "f32:2", "--arg", "u32:1000"])
    while not stop.is_set():
        for c in cmds:
            key = f"am {c[0]}"
            # A client turned away at the connection limit is told so and tries again, as
            # a person would; the hostile clients' reconnect loop keeps the server near it.
            # So does one refused because another connection (a junk client's write, say)
            # owns the device: it may write once that connection closes.
            for attempt in range(20):
                r = subprocess.run([am, *c], capture_output=True, text=True)
                if r.returncode == 0:
                    break
                if "its limit" in r.stderr:
                    n.add(f"{key} turned away at the limit")
                elif "is owned by" in r.stderr:
                    n.add(f"{key} refused: the device had another owner")
                else:
                    break
                time.sleep(0.2)
            if r.returncode == 0:
                n.add(f"{key} ok")
            else:
                n.add(f"{key} FAILED")
                failures.append((c, r.stderr[-500:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--am", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "am"))
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--profile", default="navi31")
    ap.add_argument("--sample-secs", type=float, default=10)
    ap.add_argument("--idle-secs", type=float, default=20)
    ap.add_argument("--tolerance-mib", type=float, default=16)
    ap.add_argument("--sysmem-mib", type=int, default=256)
    ap.add_argument("--out")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="am-soak-")
    with open(os.path.join(work, "saxpy.amk"), "w") as f:
        f.write(SAXPY)
    r = subprocess.run([a.am, "compile", "saxpy.amk", "--target", "gfx1100"], cwd=work,
                       capture_output=True, text=True)
    hsaco = os.path.join(work, "saxpy.hsaco") if r.returncode == 0 else None
    if hsaco is None:
        print(f"am compile failed, no am run clients: {r.stderr[-300:]}", file=sys.stderr)

    err_path = f"/tmp/am-soak-{os.getpid()}.stderr"
    with open(err_path, "wb") as err:
        server = subprocess.Popen(
            [a.am, "serve", "--listen", "127.0.0.1:0", "--idle-timeout", "5", "--read-timeout", "5",
             f"mock:{a.profile}", f"mock:{a.profile}:1"],
            stdout=subprocess.PIPE, stderr=err, text=True)
    line = server.stdout.readline()
    port = int(line.strip().rsplit(":", 1)[1])
    threading.Thread(target=lambda: server.stdout.read(), daemon=True).start()
    spec = f"remote:127.0.0.1:{port}:0"

    stop = threading.Event()
    n = Counters()
    failures = []
    threads = [
        threading.Thread(target=hostile_flood, args=(port, stop, n)),
        threading.Thread(target=hostile_junk, args=(port, stop, n, 17)),
        threading.Thread(target=hostile_holder, args=(port, stop, n, True)),
        threading.Thread(target=hostile_holder, args=(port, stop, n, False)),
        threading.Thread(target=good_raw, args=(port, stop, n)),
        threading.Thread(target=good_tools, args=(a.am, spec, stop, n, failures, hsaco)),
        threading.Thread(target=good_sysmem, args=(port, stop, n, a.sysmem_mib)),
        threading.Thread(target=hostile_trickler, args=(port, stop, n)),
    ]
    threads += [threading.Thread(target=hostile_pinger, args=(port, stop, n)) for _ in range(4)]
    threads += [threading.Thread(target=hostile_dribbler, args=(port, stop, n)) for _ in range(2)]
    threads += [threading.Thread(target=hostile_reconnector, args=(port, stop, n)) for _ in range(3)]
    for t in threads:
        t.daemon = True
        t.start()

    samples = []
    start = time.time()
    try:
        while time.time() - start < a.minutes * 60:
            time.sleep(a.sample_secs)
            if server.poll() is not None:
                print(f"the server exited with {server.returncode}", file=sys.stderr)
                break
            samples.append((round(time.time() - start, 1), rss_kib(server.pid)))
            print(f"{samples[-1][0]:7.1f} s  RSS {samples[-1][1] / 1024:8.1f} MiB", flush=True)
        stop.set()
        for t in threads:
            t.join(timeout=10)
        # Memory once every client has left: what the server gives back.
        time.sleep(a.idle_secs)
        if server.poll() is None:
            idle = rss_kib(server.pid)
            print(f"idle {a.idle_secs:.0f} s after the clients: RSS {idle / 1024:8.1f} MiB", flush=True)
    finally:
        stop.set()
        alive = server.poll() is None
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)

    warm = [r for t, r in samples if t >= min(60, a.minutes * 60 / 2)]
    base, end = warm[0], idle if alive else warm[-1]
    stderr_bytes = os.path.getsize(err_path)
    result = {
        "minutes": a.minutes,
        "profile": a.profile,
        "rss_first_sample_mib": round(samples[0][1] / 1024, 1),
        "rss_after_warmup_mib": round(base / 1024, 1),
        "rss_max_under_load_mib": round(max(r for _, r in samples) / 1024, 1),
        "rss_idle_end_mib": round(end / 1024, 1),
        "rss_min_mib": round(min(warm) / 1024, 1),
        "rss_max_mib": round(max(warm) / 1024, 1),
        "server_stderr_bytes": stderr_bytes,
        "server_alive_at_end": alive,
        "counts": dict(sorted(n.c.items())),
        "good_failures": len(failures),
    }
    os.unlink(err_path)
    print(json.dumps(result, indent=2))
    if failures:
        print("first failure:", failures[0], file=sys.stderr)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({**result, "samples": samples}, f, indent=1)
    flat = (end - base) / 1024 <= a.tolerance_mib
    bad = [k for k in n.c if "FAILED" in k]
    if not flat or bad or not alive:
        print(f"soak failed: flat={flat} failed clients={bad} alive={alive}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
