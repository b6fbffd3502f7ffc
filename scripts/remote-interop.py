#!/usr/bin/env python3
"""Wire-compatibility check of the remote PCI protocol against tinygrad itself.

    python3 scripts/remote-interop.py TINYGRAD_CHECKOUT path/to/am

Chain: tinygrad's client (RemotePCIDevice) -> `am serve` -> our client (am serve relays a
remote:... device) -> tinygrad's server (extra/remote/serve.py) -> a fake device in this
process. Every value read back is compared with what the fake holds. Not run by CI: it needs
a tinygrad checkout (no GPU).
"""
import ctypes, os, socket, struct, subprocess, sys, threading
TINYGRAD, AM = sys.argv[1], sys.argv[2]
sys.path[:0] = [TINYGRAD, os.path.join(TINYGRAD, "extra", "remote")]
import serve as tgserve
from tinygrad.runtime.support.hcq import MMIOInterface
from tinygrad.runtime.support.system import RemotePCIDevice, System

class FakeDev:
  inst = None
  def __init__(self, pfx, pcibus):
    self.cfg = bytearray(4096); self.cfg[0:2] = (0x1002).to_bytes(2, 'little'); self.cfg[2:4] = (0x744c).to_bytes(2, 'little')
    self.bars = {0: (ctypes.c_uint8 * (8 << 20))(), 5: (ctypes.c_uint8 * (64 << 10))()}
    self.sysmem = []; self.resets = 0
    FakeDev.inst = self
  def read_config(self, off, size): return int.from_bytes(self.cfg[off:off+size], 'little')
  def write_config(self, off, val, size): self.cfg[off:off+size] = val.to_bytes(size, 'little')
  def bar_info(self, bar): return (0xd0000000 + bar * 0x10000000, len(self.bars[bar]))
  def map_bar(self, bar): return MMIOInterface(ctypes.addressof(self.bars[bar]), len(self.bars[bar]))
  def alloc_sysmem(self, size, contiguous=False):
    buf = (ctypes.c_uint8 * size)(); self.sysmem.append(buf)
    return MMIOInterface(ctypes.addressof(buf), size), [0x100000000 * len(self.sysmem) + p * 0x1000 for p in range(size // 0x1000)]
  def reset(self): self.resets += 1
  def resize_bar(self, bar): pass

System.list_devices = lambda vendor, devices, base_class=None: [(FakeDev, "0000:03:00.0")]

tg = socket.socket(); tg.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); tg.bind(("127.0.0.1", 0)); tg.listen(4)
tg_port = tg.getsockname()[1]
def tg_loop():
  while True:
    conn, _ = tg.accept()
    try: tgserve.serve(conn)
    except ConnectionError as e: print("tinygrad server:", e)
threading.Thread(target=tg_loop, daemon=True).start()

am = subprocess.Popen([AM, "serve", "--listen", "127.0.0.1:0", f"remote:127.0.0.1:{tg_port}:0"], stdout=subprocess.PIPE, text=True)
line = am.stdout.readline(); print("am:", line.strip()); print("am:", am.stdout.readline().strip())
am_port = int(line.rsplit(":", 1)[1])
try:
  os.environ["REMOTE"] = f"127.0.0.1:{am_port}"
  [(sock, name)] = RemotePCIDevice.remote_list(0x1002, ((0xffff, (0x744c, 0x74a1)),), None)
  print("tinygrad client sees:", name)
  dev = RemotePCIDevice("AM", name.split(":", 3)[3], sock)
  fake = FakeDev.inst
  assert dev.read_config(0, 2) == 0x1002 and dev.read_config(2, 2) == 0x744c
  dev.write_config(0x04, 0x6, 2); assert fake.cfg[4] == 0x6
  assert dev.bar_info(5) == (0xd0000000 + 5 * 0x10000000, 64 << 10), dev.bar_info(5)
  regs = dev.map_bar(5, fmt='I')
  regs[0x40] = 0xdeadbeef
  assert regs[0x40] == 0xdeadbeef and bytes(fake.bars[5][0x100:0x104]) == struct.pack('<I', 0xdeadbeef)
  vram = dev.map_bar(0)
  blob = os.urandom((8 << 20) - 16)  # one firmware-sized MMIO_WRITE, nearly the whole BAR
  vram[16:16 + len(blob)] = blob
  assert bytes(vram[16:16 + len(blob)]) == blob and bytes(fake.bars[0][16:16 + len(blob)]) == blob
  mem, paddrs = dev.alloc_sysmem(0x3000)
  assert paddrs == [0x100000000 + p * 0x1000 for p in range(3)], paddrs
  mem[0x1000:0x1004] = b"\x01\x02\x03\x04"
  assert bytes(mem[0x1000:0x1004]) == b"\x01\x02\x03\x04" and bytes(fake.sysmem[0][0x1000:0x1004]) == b"\x01\x02\x03\x04"
  dev.reset(); assert fake.resets == 1
  print("interop OK: tinygrad client -> am serve -> our client -> tinygrad server")
finally:
  am.kill()
