#!/usr/bin/env python3
"""Regenerates the gfx1200/gfx1201 (RDNA4) decoder tables and test vectors from LLVM 22.

The same three steps as gen.py (whose code this reuses), for gfx1200:
Step 1 asks LLVM's disassembler which mnemonic each opcode number of each encoding has:
    llvm-mc-22 --disassemble -triple=amdgcn-amd-amdhsa -mcpu=gfx1200 --show-encoding
Step 2 re-assembles every text LLVM printed with
    llvm-mc-22 -triple=amdgcn-amd-amdhsa -mcpu=gfx1200 --show-encoding
and writes `text ; encoding: [bytes]` lines to gfx1200.txt.
Step 3 writes the opcode-number -> mnemonic tables to emu/src/rdna4/opcodes.rs.
Then the same three steps run with -mcpu=gfx1201 (into a temporary directory) and the run
fails if the tables or the vectors differ: the two processors share one ISA.

gfx12 keeps gfx11's SOP*, VOP*, VOPD and DS encodings and replaces SMEM (new field
positions, 24-bit offset, th/scope cache policy), FLAT/GLOBAL/SCRATCH (VFLAT, VGLOBAL,
VSCRATCH: three dwords, 24-bit offset) and MUBUF/MTBUF (VBUFFER: three dwords); only those
candidate words differ from gen.py's.

Run from the repository root:  python3 emu/tests/vectors/gen_gfx12.py
"""
import os, re, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402

gen.CPU = "-mcpu=gfx1200"
gen.VECTORS = os.path.join(gen.HERE, "gfx1200.txt")
gen.TABLES = os.path.join(gen.ROOT, "emu", "src", "rdna4", "opcodes.rs")
gen.SCRIPT = "emu/tests/vectors/gen_gfx12.py"
gen.TABLES_DOC = ("gfx1200", "gfx1200/gfx1201 (RDNA4)")

gfx11_classify = gen.classify


def classify(words):
    """(encoding, opcode) of an instruction's first dword, per the gfx12 encoding prefixes."""
    w = words[0]
    if w >> 26 == 0x3D: return "smem", (w >> 13) & 0x3F
    if w >> 26 == 0x3B: return ["flat", "scratch", "global", "?"][(w >> 24) & 3], (w >> 14) & 0xFF
    if w >> 26 == 0x31:
        if (w >> 18) & 0xF == 8 and (w >> 21) & 1: return "mtbuf", (w >> 14) & 0xF
        return "mubuf", (w >> 14) & 0xFF
    if w >> 26 in (0x37, 0x38, 0x3A): return "?", None  # gfx11 memory encodings are gone
    return gfx11_classify(words)


gen.classify = classify
gfx11_disassemble = gen.disassemble
S_NOP = 0xBF800000


def disassemble(cands):
    """gen.disassemble with three `s_nop 0` after each candidate: LLVM skips one dword of an
    invalid word and decodes on from there, across line ends, so without them one invalid
    candidate can swallow the next ones."""
    return gfx11_disassemble([(k, tuple(w) + (S_NOP,) * 3) for k, w in cands])


gen.disassemble = disassemble
v = gen.v
ENC = dict(gen.ENC)
# SMEM: sbase[5:0] (pair index; 2 is s[4:5] or s[4:7], valid for every op), sdata[12:6], op[18:13], nv[20], scope[22:21], th[24:23];
# offset[23:0] (signed), soffset[31:25].
ENC["smem"] = (range(0, 0x40), [
    lambda op: (0xF4000000 | op << 13 | 8 << 6 | 2, 0xF8000000 | 0x10),
    lambda op: (0xF4000000 | op << 13 | 8 << 6 | 2, 0x0A000000 | 0x10),
    lambda op: (0xF4000000 | op << 13 | 8 << 6 | 2, 0xF8000000 | 0xFFFFF0),
    lambda op: (0xF4000000 | op << 13 | 1 << 23 | 3 << 21 | 8 << 6 | 2, 0xF8000000),
    lambda op: (0xF4000000 | op << 13 | 0 << 6 | 0, 0xF8000000)])


def vflat(seg, op, saddr, vdst, data, vaddr, offset=0x10, sve=0, th=0, scope=0):
    """VFLAT/VSCRATCH/VGLOBAL: saddr[6:0], op[21:14], seg[25:24]; vdst[7:0], sve[17],
    scope[19:18], th[22:20], vsrc[30:23]; vaddr[7:0], offset[31:8] (signed)."""
    return (0xEC000000 | seg << 24 | op << 14 | saddr,
            vdst | sve << 17 | scope << 18 | th << 20 | data << 23,
            vaddr | (offset & 0xFFFFFF) << 8)


ENC["flat"] = (range(0, 0x100), [
    lambda op: vflat(0, op, 0x7C, 6, 4, 2),
    lambda op: vflat(0, op, 0x7C, 6, 2, 4, th=1),
    lambda op: vflat(0, op, 0x7C, 6, 2, 4, offset=-8, th=3, scope=2)])
ENC["scratch"] = (range(0, 0x100), [
    lambda op: vflat(1, op, 2, 6, 4, 1),
    lambda op: vflat(1, op, 0x7C, 6, 4, 1, sve=1),
    lambda op: vflat(1, op, 0x7C, 6, 4, 1, sve=1, offset=-4, th=1, scope=1)])
ENC["global"] = (range(0, 0x100), [
    lambda op: vflat(2, op, 2, 6, 4, 1),
    lambda op: vflat(2, op, 0x7C, 6, 4, 2),
    lambda op: vflat(2, op, 2, 6, 8, 1),
    lambda op: vflat(2, op, 2, 0, 4, 1),
    lambda op: vflat(2, op, 2, 6, 4, 1, th=1),
    lambda op: vflat(2, op, 0x7C, 6, 4, 2, th=1, scope=3, offset=0x7FFFFF),
    lambda op: vflat(2, op, 2, 6, 4, 1, offset=-0x800000)])


def vbuffer(op, soffset, vdata, rsrc, vaddr, offset=0x10, offen=0, idxen=0, th=0, scope=0, fmt=1, tbuf=False):
    """VBUFFER: soffset[6:0], op[21:14] (MTBUF: op[17:14] with [21:18] = 8); vdata[7:0],
    rsrc[17:9], scope[19:18], th[22:20], format[29:23], offen[30], idxen[31]; vaddr[7:0],
    offset[31:8]."""
    opf = (8 << 4 | op) if tbuf else op
    return (0xC4000000 | opf << 14 | soffset,
            vdata | rsrc << 9 | scope << 18 | th << 20 | fmt << 23 | offen << 30 | idxen << 31,
            vaddr | offset << 8)


ENC["mubuf"] = (range(0, 0x80), [
    lambda op: vbuffer(op, 0x7C, 1, 4, 2),
    lambda op: vbuffer(op, 3, 1, 8, 2, offen=1, th=1),
    lambda op: vbuffer(op, 3, 1, 8, 2, offen=1, idxen=1, th=1, scope=3, offset=0x7FFFFF)])
ENC["mtbuf"] = (range(0, 0x10), [
    lambda op: vbuffer(op, 3, 1, 4, 2, offen=1, fmt=22, tbuf=True)])
gen.ENC = ENC


def body(path):
    """A generated file without its comment header (which names the processor)."""
    with open(path) as f:
        return [l for l in f if not l.startswith(("#", "//"))]


def buf_formats():
    """The symbolic names LLVM prints for each value of the 7-bit MTBUF format field."""
    lines = [gen.le(*vbuffer(0, 3, 1, 4, 2, offen=1, fmt=f, tbuf=True)) for f in range(128)]
    r = subprocess.run([gen.MC, "--disassemble", gen.TRIPLE, gen.CPU, "--show-encoding"],
                       input="\n".join(lines) + "\n", capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*.*format:\[(\w+)\].*; encoding: \[(.*)\]", line)
        if m:
            b = [int(x, 16) for x in m.group(2).split(",")]
            out[(b[7] << 1 | b[6] >> 7) & 0x7F] = m.group(1)
    return out


def run(cpu, vectors, tables):
    gen.CPU, gen.VECTORS, gen.TABLES = "-mcpu=" + cpu, vectors, tables
    gen.shapes = {}
    gen.main()
    with open(tables, "a") as f:
        f.write("\n/// MTBUF `format` values and the names LLVM prints for them.\n")
        f.write("pub const BUF_FORMATS: &[(u16, &str)] = &[\n")
        for k, n in sorted(buf_formats().items()):
            f.write("    (0x%x, \"%s\"),\n" % (k, n))
        f.write("];\n")
    subprocess.run(["rustfmt", "--edition", "2024", "--config", "max_width=100", tables], check=True)
    return body(vectors), body(tables)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        other = run("gfx1201", os.path.join(d, "gfx1201.txt"), os.path.join(d, "opcodes.rs"))
    mine = run("gfx1200", os.path.join(gen.HERE, "gfx1200.txt"),
               os.path.join(gen.ROOT, "emu", "src", "rdna4", "opcodes.rs"))
    for what, a, b in [("vectors", mine[0], other[0]), ("opcode tables", mine[1], other[1])]:
        if a != b:
            diff = [(x, y) for x, y in zip(a, b) if x != y][:10]
            sys.exit("gfx1201's %s differ from gfx1200's: %s" % (what, diff or "length"))
    print("gfx1201 has the same %d vectors and opcode tables as gfx1200" % len(mine[0]), file=sys.stderr)
