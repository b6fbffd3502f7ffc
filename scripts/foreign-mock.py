#!/usr/bin/env python3
"""Our driver against tinygrad's mock AM GPU: a cross-check of our driver against a peer's model.

    python3 scripts/foreign-mock.py TINYGRAD_CHECKOUT path/to/am [--keep-mp1] [--as-is] [NAME=VALUE ...]

Chain: our `am` (backend `remote:127.0.0.1:PORT:0`) -> tinygrad's server
(`extra/remote/serve.py`, its `serve()` run here on a free port) -> tinygrad's mock AM GPU
(`test/mockgpu/am/amgpu.py`, a gfx1200 with 512 MiB of VRAM, in this process). The mock is
selected the way tinygrad's own CI runs serve.py (`DEV=MOCKPCI+AMD`): its virtual sysfs
files stand in for /sys/bus/pci/devices/mock:am:0.

Steps, each check reported PASS / FAIL:
  1. `am list --remote`: the server exports one AMD GPU, `mock:am:0`, as index 0.
  2. `am info --json` on the mock as it is: refused, as Linux refuses it (the mock's gc_info
     table_id is wrong). Then the script fixes the mock's discovery table in its VRAM (table id,
     sizes, checksums, MP1 segment 1 unless --keep-mp1: what firmware leaves) and checks that
     VRAM size, every IP block (hardware id, version, register bases) and the gc_info counts
     equal what the mock built its table from, and that our navi44 profile has the same blocks.
  3. `am init --json` twice: a cold boot, then a warm one (the mock keeps its state between
     connections), after fixing the one register answer of the mock's model that hardware
     gives otherwise (RLC bootload status; --as-is keeps it). The mock's register traffic is
     traced (accesses per IP block, the last registers of a failed boot) so a failure shows
     where the two models part.
docs/CONFORMANCE.md ("Our driver on tinygrad's mock GPU") says what it showed and, for each place
where the mock is not what hardware is, which side Linux takes; such places print as NOTE.

Exit status: 0 all checks pass; 2 only `am init` failed; 1 otherwise.
Not run by CI: it needs a tinygrad checkout (numpy and tinygrad's own imports; no GPU).
`NAME=VALUE` arguments go into `am init`'s environment (e.g. AM_FIRMWARE_PATH=...).
"""
import collections, ctypes, json, os, socket, subprocess, sys, threading
TINYGRAD, AM = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
INIT_ENV = dict(a.split("=", 1) for a in sys.argv[3:] if "=" in a)
# tinygrad reads DEV when its runtime is first imported: the mock's FileIOInterface replaces
# sysfs and procfs (tinygrad/runtime/support/hcq.py, test/mockgpu/mockgpu.py).
os.environ["DEV"] = "MOCKPCI+AMD"
sys.path[:0] = [TINYGRAD, os.path.join(TINYGRAD, "extra", "remote")]
os.chdir(TINYGRAD)
import serve as tgserve  # noqa: E402
from test.mockgpu import mockgpu  # noqa: E402
from test.mockgpu.am import amgpu  # noqa: E402
from tinygrad.runtime.autogen.am import am as amdefs  # noqa: E402

[drv] = [d for d in mockgpu.drivers if type(d).__name__ == "AMDriver"]
gpu = drv.gpu

# Register trace: every dword the server reads or writes through the mock's BAR5.
names = {}
for block in gpu.mmio.blocks:
  for addr, name in block._a2n.items(): names.setdefault(addr, (type(block).__name__[4:], name))
trace = collections.deque(maxlen=40)
per_block = collections.Counter()
MMIO = type(gpu.mmio)
_get, _set = MMIO.__getitem__, MMIO.__setitem__
def _name(i): return "%s %s" % names[i] if i in names else f"reg {i:#x} (no mock block)"
def traced_get(self, i):
  v = _get(self, i)
  if isinstance(i, int):
    trace.append(f"R {_name(i)} = {v:#x}"); per_block[names.get(i, ("unmodelled",))[0]] += 1
  return v
def traced_set(self, i, v):
  if isinstance(i, int):
    trace.append(f"W {_name(i)} <- {v:#x}"); per_block[names.get(i, ("unmodelled",))[0]] += 1
  _set(self, i, v)
MMIO.__getitem__, MMIO.__setitem__ = traced_get, traced_set

def tg_conn(conn):
  conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
  try: tgserve.serve(conn)
  except ConnectionError as e:
    if str(e) != "client disconnected": print(f"  tinygrad server closed a connection: {e}")
  except Exception as e: print(f"  tinygrad server: {type(e).__name__}: {e}")
  finally: conn.close()
lsock = socket.socket(); lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lsock.bind(("127.0.0.1", 0)); lsock.listen(4)
PORT = lsock.getsockname()[1]
def accept_loop():
  while True: threading.Thread(target=tg_conn, args=(lsock.accept()[0],), daemon=True).start()
threading.Thread(target=accept_loop, daemon=True).start()
SPEC = f"remote:127.0.0.1:{PORT}:0"

results = {}
def check(step, ok, what):
  print(f"  {'PASS' if ok else 'FAIL'} {what}")
  results[step] = results.get(step, True) and bool(ok)
def note(what): print(f"  NOTE {what}")
def am(*args, env=None, timeout=600):
  return subprocess.run([AM, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})

print(f"tinygrad {TINYGRAD} mock AM GPU served on 127.0.0.1:{PORT}")
print("1. am list --remote")
r = am("list", "--json", "--remote", f"127.0.0.1:{PORT}")
try:
  [server] = json.loads(r.stdout)["remote"]
  gpus = server.get("gpus", [])
  check("list", [g.get("server_name") for g in gpus] == ["mock:am:0"], f"server exports mock:am:0 as index 0: {gpus}")
except (ValueError, KeyError) as e:
  check("list", False, f"`am list` output unreadable ({e}): {r.stdout}{r.stderr}")

print("2. am info on the mock as it is")
r = am("info", "--json", SPEC)
try: err = json.loads(r.stdout).get("error") or ""
except ValueError: err = r.stderr.strip()
check("info", r.returncode != 0 and "gc_info header table_id" in err,
      f"discovery refused as Linux refuses it ('invalid ip discovery gc table id'): {err}")

print("   patching the mock's discovery table into what firmware leaves (see docs/CONFORMANCE.md)")
def fix_discovery():
  """gc_info table_id 'GC' (the mock writes the table index 1), binary_size, and the GC table and
  binary checksums Linux verifies (the mock leaves them 0)."""
  base, vram = amgpu.VRAM_SIZE - (64 << 10), gpu.vram
  bhdr = amdefs.struct_binary_header.from_buffer(vram, base)
  gc_rel = bhdr.table_list[amdefs.GC].offset
  ghdr = amdefs.struct_gpu_info_header.from_buffer(vram, base + gc_rel)
  print(f"     gc_info table_id {ghdr.table_id:#x} -> {amdefs.GC_TABLE_ID:#x}, binary_size {bhdr.binary_size} -> {gc_rel + ghdr.size}")
  ghdr.table_id = amdefs.GC_TABLE_ID
  bhdr.table_list[amdefs.GC].checksum = sum(vram[base + gc_rel:base + gc_rel + ghdr.size]) & 0xffff
  bhdr.binary_size = gc_rel + ghdr.size
  bhdr.binary_checksum = sum(vram[base + 10:base + bhdr.binary_size]) & 0xffff  # after binary_checksum
fix_discovery()
expected_bases = {hwip: list(b) for hwip, b in amgpu.IP_BASES.items()}
def fix_mp1_segment1():
  """MP1 segment 1: the mock copies MP0's (0xdc0000). MP 14.0.2's header puts the SMU mailbox at
  segment 1 + 0x82 (Linux's smu_v14_0_2 uses it); tinygrad's driver uses the MP 11.0 header's
  segment 0 + 0x282 = 0x16282, where the mock models the mailbox. Both drivers run real RDNA4
  boards, so there segment 1 is 0x16200 (our navi44 profile's value)."""
  base, vram = amgpu.VRAM_SIZE - (64 << 10), gpu.vram
  bhdr = amdefs.struct_binary_header.from_buffer(vram, base)
  off = base + bhdr.table_list[amdefs.IP_DISCOVERY].offset + ctypes.sizeof(amdefs.struct_ip_discovery_header) + ctypes.sizeof(amdefs.struct_die_header)
  for hwip in amgpu.IP_VERSIONS:
    ip = amdefs.struct_ip_v4.from_buffer(vram, off)
    if ip.hw_id == amdefs.MP1_HWID:
      seg1 = off + 8 + 4
      print(f"     MP1 segment 1 {int.from_bytes(bytes(vram[seg1:seg1 + 4]), 'little'):#x} -> 0x16200")
      vram[seg1:seg1 + 4] = list((0x16200).to_bytes(4, "little"))
      expected_bases[hwip][1] = 0x16200
    off += 8 + 4 * ip.num_base_address
  bhdr.binary_checksum = sum(vram[base + 10:base + bhdr.binary_size]) & 0xffff
if "--keep-mp1" not in sys.argv: fix_mp1_segment1()

print("   am info on the patched table (discovery read through the remote backend)")
r = am("info", "--json", SPEC)
try: info = json.loads(r.stdout)
except ValueError: info = {}
check("info", r.returncode == 0 and info.get("error") is None, f"am info exits 0 without error: {info.get('error') or r.stderr.strip()}")
if info:
  check("info", info.get("vram_size") == amgpu.VRAM_SIZE, f"VRAM size {info.get('vram_size')} == mock's {amgpu.VRAM_SIZE} (RCC_CONFIG_MEMSIZE)")
  check("info", info.get("discovery_checksum_valid"), "binary checksum valid")
  blocks = {b["hw_id"]: b for b in info.get("ip_blocks", [])}
  for hwip, (maj, mnr, rev) in amgpu.IP_VERSIONS.items():
    hw_id, b = amgpu.IP_HWIDS[hwip], blocks.get(amgpu.IP_HWIDS[hwip])
    want_bases = [hex(x) for x in expected_bases[hwip]]
    got = (b["version"], b["bases"]) if b else None
    check("info", got == (f"{maj}.{mnr}.{rev}", want_bases),
          f"hw_id {hw_id:>2} ({b['name'] if b else '?'}): version {got[0] if got else 'missing'}, {len(want_bases)} bases as the (patched) table's")
  check("info", len(blocks) == len(amgpu.IP_VERSIONS), f"{len(blocks)} IP entries == the mock's {len(amgpu.IP_VERSIONS)}")
  gc, want = info.get("gc") or {}, amgpu.GC_INFO
  check("info", (gc.get("se"), gc.get("sh_per_se"), gc.get("cu_per_sh"), gc.get("wave_size"), gc.get("lds_size"), gc.get("max_waves_per_simd")) ==
        (want["gc_num_se"], want["gc_num_sh_per_se"], want["gc_num_cu_per_sh"], want["gc_wave_size"], want["gc_lds_size"], want["gc_max_waves_per_simd"]),
        f"gc_info {gc.get('table_version')}: {gc.get('se')} SE x {gc.get('sh_per_se')} SH x {gc.get('cu_per_sh')} CU, wave{gc.get('wave_size')}")
  check("info", info.get("gfx_target") == "gfx1200", f"target {info.get('gfx_target')} (from GC {info.get('ip_versions', {}).get('GC')})")
  check("info", (info.get("boot_state") or {}).get("am_initialised") is False, f"boot state: {(info.get('boot_state') or {}).get('state')}")
  if info.get("device_id") != "0x7590":
    note(f"config space reads vendor {info.get('vendor_id')} device {info.get('device_id')} ({info.get('product_name')}): "
         "the mock's config file is 256 zero bytes (its sysfs `device` file says 0x74a1, an MI300X id); a gfx1200 is 1002:7590")
  missing = [n for n, i in (("SMUIO", amdefs.SMUIO_HWID), ("THM", amdefs.THM_HWID), ("UMC", amdefs.UMC_HWID),
                            ("DF", amdefs.DF_HWID), ("ATHUB", amdefs.ATHUB_HWID)) if i not in blocks]
  if missing: note(f"no discovery entry for {', '.join(missing)} (a real RDNA4 table lists them)")

  print("   our navi44 profile (GC 12.0.0) against the foreign mock's table")
  r = am("info", "--json", "mock:navi44")
  try: ours = json.loads(r.stdout)
  except ValueError: ours = {}
  ours_blocks = {b["hw_id"]: b for b in ours.get("ip_blocks", [])}
  for hw_id, b in sorted(blocks.items()):
    o = ours_blocks.get(hw_id)
    nz = lambda bases: [int(x, 16) for x in bases][:max([i + 1 for i, x in enumerate(bases) if int(x, 16)] or [0])]
    same = o is not None and (o["version"], nz(o["bases"])) == (b["version"], nz(b["bases"]))
    check("navi44", same, f"{b['name']}: navi44 has " + (("the same version and bases" if same else f"{o['version']} bases {o['bases']}, the mock {b['version']} {b['bases']}") if o else "no entry"))
  extra = sorted(o["name"] for h, o in ours_blocks.items() if h not in blocks)
  if extra: note(f"navi44 also lists {', '.join(extra)}")
  og = ours.get("gc") or {}
  if (og.get("se"), og.get("sh_per_se"), og.get("cu_per_sh")) != (gc.get("se"), gc.get("sh_per_se"), gc.get("cu_per_sh")):
    note(f"shader counts differ: navi44 {og.get('se')} SE x {og.get('sh_per_se')} SH x {og.get('cu_per_sh')} CU, the foreign mock {gc.get('se')} x {gc.get('sh_per_se')} x {gc.get('cu_per_sh')}")

# Model fixes for the boot, each where the mock answers what hardware (Linux) would not accept.
def fix_rlc_bootload():
  """RLC_RLCS_BOOTLOAD_STATUS: the mock answers 0x2 (BOOTLOAD_COMPLETE, bit 31, clear), which
  passes tinygrad's wait (CP_STAT == 0 or BOOTLOAD_COMPLETE == 0) but not Linux's
  gfx_v12_0_wait_for_rlc_autoload_complete (CP_STAT == 0 and BOOTLOAD_COMPLETE == 1), nor ours."""
  gfx = next(b for b in gpu.mmio.blocks if type(b).__name__ == "MockGFX")
  status, read = gfx.reg("regRLC_RLCS_BOOTLOAD_STATUS"), gfx.read
  gfx.read = lambda reg: read(reg) | (1 << 31) if reg == status else read(reg)
  print("     RLC_RLCS_BOOTLOAD_STATUS 0x2 -> 0x80000002 (BOOTLOAD_COMPLETE)")
if "--as-is" not in sys.argv:
  print("   fixing the mock's model where hardware answers otherwise (see docs/CONFORMANCE.md)")
  fix_rlc_bootload()

print("3. am init twice (boot, then fini; an 'ERROR: expected str, bytes or os.PathLike object' from the server is RESIZE_BAR)")
for run, want_kind in ((1, "cold"), (2, "warm")):
  trace.clear(); per_block.clear()
  r = am("init", "--json", SPEC, env=INIT_ENV)
  try: rep = json.loads(r.stdout)
  except ValueError: rep = {}
  check("init", r.returncode == 0 and rep.get("finalised"), f"am init #{run} exits {r.returncode}, finalised {rep.get('finalised')}: {rep.get('error') or r.stderr.strip()}")
  if rep:
    check("init", rep.get("boot_kind") == want_kind, f"boot kind {rep.get('boot_kind')} ({rep.get('full_boot_reason') or 'no full-boot reason'}), {want_kind} expected: the mock keeps its registers between connections")
    print("    phases: " + ", ".join(f"{p['name']} {p['reg_reads']}r/{p['reg_writes']}w" for p in rep.get("phases", [])))
    steps = [s["step"] for s in rep.get("firmware", [])]
    print(f"    PSP loaded {len(steps)} steps, {rep.get('firmware_bytes')} bytes: {' '.join(steps)}")
  print(f"    mock register accesses, per block: {dict(per_block) or 'none'}")
  if trace and not (rep and rep.get("finalised")):
    print("    last register accesses the mock saw:")
    for t in list(trace)[-15:]: print(f"      {t}")
  if not rep.get("finalised"): break

print("summary: " + ", ".join(f"{s} {'PASS' if ok else 'FAIL'}" for s, ok in results.items()))
sys.exit(0 if all(results.values()) else 2 if [s for s, ok in results.items() if not ok] == ["init"] else 1)
