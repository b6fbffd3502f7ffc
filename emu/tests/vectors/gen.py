#!/usr/bin/env python3
"""Regenerates the gfx1100 decoder tables and test vectors from LLVM 22 (the oracle).

Step 1 asks LLVM's disassembler which mnemonic each opcode number of each encoding has,
by disassembling instruction words built with each opcode and a few operand patterns:
    llvm-mc-22 --disassemble -triple=amdgcn-amd-amdhsa -mcpu=gfx1100 --show-encoding
Step 2 re-assembles every text LLVM printed with
    llvm-mc-22 -triple=amdgcn-amd-amdhsa -mcpu=gfx1100 --show-encoding
and writes `text ; encoding: [bytes]` lines to gfx1100.txt: the test vectors the decoder
tests read (so tests never need llvm-mc at run time).
Step 3 writes the opcode-number -> mnemonic tables to emu/src/interp/opcodes.rs: gfx11's
numbering is the one of the interpreter's instruction form.

Run from the repository root:  python3 emu/tests/vectors/gen.py
"""
import os, re, subprocess, sys, tempfile

MC = "llvm-mc-22"
TRIPLE = "-triple=amdgcn-amd-amdhsa"
CPU = "-mcpu=gfx1100"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
# What this run writes (gen_gfx12.py sets its own before calling main()).
VECTORS = os.path.join(HERE, "gfx1100.txt")
TABLES = os.path.join(ROOT, "emu", "src", "interp", "opcodes.rs")
SCRIPT = "emu/tests/vectors/gen.py"
TABLES_DOC = ("gfx1100", "gfx1100 (RDNA3), the numbering of the interpreter's instruction form")


def le(*words):
    return ",".join("0x%02x" % ((w >> (8 * i)) & 0xFF) for w in words for i in range(4))


def classify(words):
    """(encoding, opcode) of an instruction's first dword, per the gfx11 encoding prefixes."""
    w = words[0]
    if w >> 23 == 0x17D: return "sop1", (w >> 8) & 0xFF
    if w >> 23 == 0x17E: return "sopc", (w >> 16) & 0x7F
    if w >> 23 == 0x17F: return "sopp", (w >> 16) & 0x7F
    if w >> 28 == 0xB: return "sopk", (w >> 23) & 0x1F
    if w >> 30 == 2: return "sop2", (w >> 23) & 0x7F
    if w >> 25 == 0x3F: return "vop1", (w >> 9) & 0xFF
    if w >> 25 == 0x3E: return "vopc", (w >> 17) & 0xFF
    if w >> 31 == 0: return "vop2", (w >> 25) & 0x3F
    if w >> 26 == 0x35: return "vop3", (w >> 16) & 0x3FF
    if w >> 24 == 0xCC: return "vop3p", (w >> 16) & 0x7F
    if w >> 26 == 0x32: return "vopd", ((w >> 22) & 0xF, (w >> 17) & 0x1F)
    if w >> 26 == 0x3D: return "smem", (w >> 18) & 0xFF
    if w >> 26 == 0x36: return "ds", (w >> 18) & 0xFF
    if w >> 26 == 0x37: return ["flat", "scratch", "global", "?"][(w >> 16) & 3], (w >> 18) & 0x7F
    if w >> 26 == 0x38: return "mubuf", (w >> 18) & 0xFF
    if w >> 26 == 0x3A: return "mtbuf", (w >> 15) & 0xF
    return "?", None


def disassemble(cands):
    """cands: list of (key, words). Returns {(encoding, op): [text]} for what LLVM decodes."""
    out = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.txt")
        with open(path, "w") as f:
            for _, w in cands:
                f.write(le(*w) + "\n")
        r = subprocess.run([MC, "--disassemble", TRIPLE, CPU, "--show-encoding", path],
                           capture_output=True, text=True)
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(.*?)\s*; encoding: \[(.*)\]", line)
        if m:
            b = [int(x, 16) for x in m.group(2).split(",")]
            words = [b[i] | b[i + 1] << 8 | b[i + 2] << 16 | b[i + 3] << 24 for i in range(0, len(b) - 3, 4)]
            out.setdefault(classify(words), []).append(m.group(1))
    return out


def v(n):
    return 256 + n


# Operand patterns per encoding: functions of the opcode giving instruction words.
S = 0
ENC = {
    "sop2": (range(0, 0x60), [
        lambda op: (0x80000000 | op << 23 | 5 << 16 | 3 << 8 | 2,),
        lambda op: (0x80000000 | op << 23 | 4 << 16 | 6 << 8 | 2,),
        lambda op: (0x80000000 | op << 23 | 6 << 16 | 0xC1 << 8 | 0x82,)]),
    "sopk": (range(0, 0x1D), [
        lambda op: (0xB0000000 | op << 23 | 5 << 16 | 0x1234,),
        lambda op: (0xB0000000 | op << 23 | 4 << 16 | 0x0003,),
        lambda op: (0xB0000000 | op << 23 | 4 << 16 | 0x1805,),
        lambda op: (0xB0000000 | op << 23 | 0x7C << 16 | 0x0003,)]),
    "sop1": (range(0, 0x100), [
        lambda op: (0xBE800000 | 5 << 16 | op << 8 | 2,),
        lambda op: (0xBE800000 | 4 << 16 | op << 8 | 6,),
        lambda op: (0xBE800000 | 0 << 16 | op << 8 | 0x80,),
        lambda op: (0xBE800000 | 0x80 << 16 | op << 8 | 0x80,),
        lambda op: (0xBE800000 | 0x7D << 16 | op << 8 | 2,)]),
    "sopc": (range(0, 0x80), [
        lambda op: (0xBF000000 | op << 16 | 3 << 8 | 2,),
        lambda op: (0xBF000000 | op << 16 | 6 << 8 | 4,)]),
    "sopp": (range(0, 0x80), [
        lambda op: (0xBF800000 | op << 16 | 0x0003,),
        lambda op: (0xBF800000 | op << 16 | 0x0000,),
        lambda op: (0xBF800000 | op << 16 | 0x0091,),
        lambda op: (0xBF800000 | op << 16 | 0x03F7,),
        lambda op: (0xBF800000 | op << 16 | 0xFC07,),
        lambda op: (0xBF800000 | op << 16 | 0x0504,),
        lambda op: (0xBF800000 | op << 16 | 0xFFFD,)]),
    "smem": (range(0, 0x100), [
        lambda op: (0xF4000000 | op << 18 | 8 << 6 | 2, 0xF8000000 | 0x10),
        lambda op: (0xF4000000 | op << 18 | 8 << 6 | 2, 0x0A000000 | 0x0),
        lambda op: (0xF4000000 | op << 18 | 0 << 6 | 0, 0xF8000000)]),
    "vop1": (range(0, 0x100), [
        lambda op: (0x7E000000 | 2 << 17 | op << 9 | v(4),),
        lambda op: (0x7E000000 | 2 << 17 | op << 9 | 3,),
        lambda op: (0x7E000000 | 0 << 17 | op << 9 | 0,)]),
    "vop2": (range(0, 0x3F), [
        lambda op: (op << 25 | 2 << 17 | 6 << 9 | v(4),),
        lambda op: (op << 25 | 2 << 17 | 6 << 9 | 4,),
        lambda op: (op << 25 | 2 << 17 | 6 << 9 | 0xF2,)]),
    "vopc": (range(0, 0x100), [
        lambda op: (0x7C000000 | op << 17 | 6 << 9 | v(4),),
        lambda op: (0x7C000000 | op << 17 | 6 << 9 | 4,)]),
    "vop3": (range(0, 0x400), [
        lambda op: (0xD4000000 | op << 16 | 2, v(4) | v(6) << 9 | v(8) << 18),
        lambda op: (0xD4000000 | op << 16 | 2, 4 | v(6) << 9 | v(8) << 18),
        lambda op: (0xD4000000 | op << 16 | 6 << 8 | 2, v(4) | v(6) << 9 | v(8) << 18),
        lambda op: (0xD4000000 | op << 16 | 1 << 8 | 2, v(4) | 0x80 << 9 | v(8) << 18 | 1 << 29),
        lambda op: (0xD4000000 | op << 16 | 0x6A << 8 | 2, v(4) | v(6) << 9 | 0x6A << 18),
        lambda op: (0xD4000000 | op << 16 | 2, v(4) | 6 << 9 | 0x80 << 18),
        lambda op: (0xD4000000 | op << 16 | 2, 4 | 6 << 9 | 0x80 << 18)]),
    "vop3p": (range(0, 0x80), [
        lambda op: (0xCC000000 | op << 16 | 1 << 14 | 2, v(4) | v(6) << 9 | v(8) << 18 | 3 << 27),
        lambda op: (0xCC000000 | op << 16 | 1 << 14 | 2, v(4) | v(6) << 9 | v(8) << 18 | 1 << 27),
        lambda op: (0xCC000000 | op << 16 | 2, v(4) | v(8) << 9 | v(12) << 18)]),
    "ds": (range(0, 0x100), [
        lambda op: (0xD8000000 | op << 18 | 0x10, 6 << 24 | 3 << 16 | 2 << 8 | 1),
        lambda op: (0xD8000000 | op << 18 | 0x0201, 6 << 24 | 3 << 16 | 2 << 8 | 1),
        lambda op: (0xD8000000 | op << 18 | 0x10, 6 << 24 | 4 << 16 | 2 << 8 | 1),
        lambda op: (0xD8000000 | op << 18 | 0x10, 0 << 24 | 0 << 16 | 2 << 8 | 1),
        lambda op: (0xD8000000 | op << 18 | 0x10, 6 << 24 | 0 << 16 | 0 << 8 | 1),
        lambda op: (0xD8000000 | op << 18 | 0x10, 6 << 24 | 0 << 16 | 2 << 8 | 1),
        lambda op: (0xD8000000 | op << 18 | 0x10, 0 << 24 | 3 << 16 | 2 << 8 | 1)]),
    "flat": (range(0, 0x80), [
        lambda op: (0xDC000000 | op << 18 | 0 << 16 | 0x10, 6 << 24 | 0x7C << 16 | 2 << 8 | 4),
        lambda op: (0xDC000000 | op << 18 | 0 << 16 | 0x10, 6 << 24 | 0x7C << 16 | 4 << 8 | 2),
        lambda op: (0xDC000000 | op << 18 | 0 << 16 | 1 << 14 | 0x10, 6 << 24 | 0x7C << 16 | 4 << 8 | 2)]),
    "scratch": (range(0, 0x80), [
        lambda op: (0xDC000000 | op << 18 | 1 << 16 | 0x10, 6 << 24 | 2 << 16 | 4 << 8 | 1),
        lambda op: (0xDC000000 | op << 18 | 1 << 16 | 0x10, 6 << 24 | 0x7C << 16 | 4 << 8 | 1),
        lambda op: (0xDC000000 | op << 18 | 1 << 16 | 0x10, 6 << 24 | 1 << 23 | 0x7C << 16 | 4 << 8 | 1)]),
    "global": (range(0, 0x80), [
        lambda op: (0xDC000000 | op << 18 | 2 << 16 | 0x10, 6 << 24 | 2 << 16 | 4 << 8 | 1),
        lambda op: (0xDC000000 | op << 18 | 2 << 16 | 0x10, 6 << 24 | 0x7C << 16 | 4 << 8 | 2),
        lambda op: (0xDC000000 | op << 18 | 2 << 16 | 0x10, 6 << 24 | 2 << 16 | 8 << 8 | 1),
        lambda op: (0xDC000000 | op << 18 | 2 << 16 | 0x10, 2 << 16 | 4 << 8 | 1),
        lambda op: (0xDC000000 | op << 18 | 2 << 16 | 0x10, 6 << 24 | 0x7C << 16 | 4 << 8 | 2),
        lambda op: (0xDC000000 | op << 18 | 2 << 16 | 1 << 14 | 0x10, 6 << 24 | 2 << 16 | 4 << 8 | 1),
        lambda op: (0xDC000000 | op << 18 | 2 << 16 | 1 << 14 | 0x10, 6 << 24 | 0x7C << 16 | 4 << 8 | 2)]),
    "mubuf": (range(0, 0x100), [
        lambda op: (0xE0000000 | op << 18 | 0x10, 0x80 << 24 | 2 << 16 | 4 << 8 | 1),
        lambda op: (0xE0000000 | op << 18 | 1 << 12 | 0x10, 0x80 << 24 | 1 << 23 | 2 << 16 | 4 << 8 | 1)]),
    "mtbuf": (range(0, 0x10), [
        lambda op: (0xE8000000 | op << 15 | 1 << 19 | 0x10, 0x80 << 24 | 2 << 16 | 4 << 8 | 1)]),
}
# VOPD: opx 4 bits, opy 5 bits. Registers: X dst even, Y dst odd, banks kept distinct.
VOPD = [(x, y) for x in range(16) for y in range(32)]


def split_operands(t):
    """Operands of an instruction text, at parenthesis/bracket depth 0, without trailing modifiers."""
    parts = t.split(None, 1)
    if len(parts) < 2:
        return []
    rest = parts[1]
    ops, cur, depth = [], "", 0
    for ch in rest:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            ops.append(cur.strip())
            cur = ""
        else:
            cur += ch
    ops.append(cur.strip())
    last = ops[-1].split(" ")
    ops[-1] = last[0]
    return [o for o in ops if o]


def shape_of(t):
    """One token per operand: register count ('1'..'16'), 'h' for a 16-bit VGPR half, 'x' otherwise."""
    out = []
    for o in split_operands(t):
        o = o.strip("-|")
        o = re.sub(r"^(neg|abs|sext)\((.*)\)$", r"\2", o).strip("-|")
        m = re.match(r"^[vs]\[(\d+):(\d+)\]$", o) or re.match(r"^ttmp\[(\d+):(\d+)\]$", o)
        if m:
            out.append(str(int(m.group(2)) - int(m.group(1)) + 1))
        elif re.match(r"^v\d+\.[lh]$", o):
            out.append("h")
        elif re.match(r"^(v|s|ttmp)\d+$", o) or o in ("vcc_lo", "vcc_hi", "m0", "exec_lo", "exec_hi", "null"):
            out.append("1")
        elif o in ("vcc", "exec"):
            out.append("2")
        else:
            out.append("x")
    return ",".join(out)


def base_name(t):
    m = t.split()[0]
    return re.sub(r"_(e32|e64|dpp|sdwa)$", "", m)


shapes = {}


def main():
    names = {e: {} for e in ENC}
    global shapes
    texts = []
    for enc, (ops, pats) in ENC.items():
        cands = [((op, i), p(op)) for op in ops for i, p in enumerate(pats)]
        got = disassemble(cands)
        for (e, op), ts in sorted(got.items(), key=str):
            if e == "?":
                continue  # graphics-only encodings (EXP, MIMG, ...) met in leftover words
            for t in ts:
                if "/*Invalid" in t:
                    continue  # LLVM says an operand is not valid for this processor
                if e != "vopd":
                    names.setdefault(e, {}).setdefault(op, base_name(t))
                    # The text with the most register operands tells the most widths.
                    sh = shape_of(t)
                    cur = shapes.setdefault(e, {}).get(op)
                    if cur is None or sh.count("x") < cur.count("x"):
                        shapes[e][op] = sh
                texts.append(t)
    cands = [((x, y), (0xC8000000 | x << 22 | y << 17 | 3 << 9 | v(1), 4 << 24 | (7 >> 1) << 17 | 2 << 9 | v(6)))
             for x, y in VOPD]
    cands += [((x, y), (0xC8000000 | x << 22 | y << 17 | 3 << 9 | 0xF2, 4 << 24 | (7 >> 1) << 17 | 2 << 9 | 0x81))
              for x, y in VOPD]
    cands += [((x, y), (0xC8000000 | x << 22 | y << 17 | 0 << 9 | v(1), 4 << 24 | (7 >> 1) << 17 | 0 << 9 | v(6)))
              for x, y in VOPD]
    cands += [((x, y), (0xC8000000 | x << 22 | y << 17 | 3 << 9 | 0xFF, 4 << 24 | (7 >> 1) << 17 | 0 << 9 | v(6), 0x3ff))
              for x, y in VOPD]
    got = disassemble(cands)
    vopdx, vopdy = {}, {}
    for (e, xy), ts in sorted(got.items(), key=str):
        if e != "vopd":
            continue
        x, y = xy
        for t in ts:
            parts = t.split("::")
            vopdx.setdefault(x, parts[0].split()[0].replace("v_dual_", "v_"))
            vopdy.setdefault(y, parts[1].split()[0].replace("v_dual_", "v_"))
            texts.append(t)
    # DPP and literal forms of VOP1/VOP2/VOPC/VOP3.
    extra = []
    for op in names["vop2"]:
        for k, ctrl in enumerate([0x1B, 0xE4, 0x111, 0x11F, 0x101, 0x121, 0x130 + 1, 0x140, 0x141, 0x150, 0x15F, 0x160, 0x16F]):
            extra.append(((op, 100 + k), (op << 25 | 2 << 17 | 6 << 9 | 0xFA, 0xF5000000 | ctrl << 8 | 4 | (1 << 19 if k == 2 else 0))))
        extra.append(((op, 1), (op << 25 | 2 << 17 | 6 << 9 | 0xE9, 0xFAC688 << 8 | 4)))
        extra.append(((op, 2), (op << 25 | 2 << 17 | 6 << 9 | 0xFF, 0x12345678)))
        extra.append(((op, 20), (op << 25 | 2 << 17 | 6 << 9 | v(4), 0x1234)))
        extra.append(((op, 3), (op << 25 | 2 << 17 | 6 << 9 | 0xFA, 0xFF000000 | 0x1B << 8 | 1 << 20 | 1 << 23 | 4)))
    for op in names["vop1"]:
        extra.append(((op, 5), (0x7E000000 | 2 << 17 | op << 9 | 0xFA, 0xFF000000 | 0x111 << 8 | 4)))
        extra.append(((op, 55), (0x7E000000 | 2 << 17 | op << 9 | 0xE9, 0x00FAC688 << 8 | 4)))
        extra.append(((op, 6), (0x7E000000 | 2 << 17 | op << 9 | 0xFF, 0x3F800001)))
    for op in names["vopc"]:
        extra.append(((op, 7), (0x7C000000 | op << 17 | 6 << 9 | 0xFF, 0x4048F5C3)))
    for op in names["vop3"]:
        extra.append(((op, 8), (0xD4000000 | op << 16 | 2, 0xFF | v(6) << 9 | v(8) << 18, 0x00001234)))
        extra.append(((op, 9), (0xD4000000 | op << 16 | 1 << 15 | 2, v(4) | v(6) << 9 | v(8) << 18 | 1 << 27)))
    for op in names["sop2"]:
        extra.append(((op, 10), (0x80000000 | op << 23 | 5 << 16 | 3 << 8 | 0xFF, 0xDEADBEEF)))
    for op in names["sopc"]:
        extra.append(((op, 11), (0xBF000000 | op << 16 | 0xFF << 8 | 2, 0x00010000)))
    for op in names["vop3p"]:
        extra.append(((op, 12), (0xCC000000 | op << 16 | 1 << 14 | 1 << 11 | 2, v(4) | v(6) << 9 | v(8) << 18 | 2 << 27 | 1 << 29)))
    for (e, _), ts in disassemble(extra).items():
        if e != "?":
            texts.extend(t for t in ts if "/*Invalid" not in t)

    # Step 2: assemble LLVM's own texts; keep what assembles (the vectors).
    seen, uniq = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            uniq.append(t)
    asm_cmd = [MC, TRIPLE, CPU, "--show-encoding"]
    r = subprocess.run(asm_cmd, input="\n".join(uniq) + "\n", capture_output=True, text=True)
    vecs = []
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(.*?)\s*; encoding: \[(.*)\]", line)
        if m:
            vecs.append((m.group(1), m.group(2)))
    with open(VECTORS, "w") as f:
        f.write("# Generated by %s; do not edit.\n" % SCRIPT)
        f.write("# Assembled by: " + " ".join(asm_cmd) + " (" + version() + ")\n")
        f.write("# Inputs: the texts printed by: " + " ".join([MC, "--disassemble", TRIPLE, CPU, "--show-encoding"]) + "\n")
        f.write("# Format: <assembly text> ; encoding: [<bytes>]\n")
        for t, e in vecs:
            f.write("%s ; encoding: [%s]\n" % (t, e))
    write_tables(names, vopdx, vopdy)
    # Format like the rest of the crate (cargo fmt), so regenerating is a no-op.
    subprocess.run(["rustfmt", "--edition", "2024", "--config", "max_width=100", TABLES], check=True)
    print("vectors: %d, opcodes: %s" % (len(vecs), {k: len(t) for k, t in names.items()}), file=sys.stderr)


def version():
    r = subprocess.run([MC, "--version"], capture_output=True, text=True)
    m = re.search(r"LLVM version (\S+)", r.stdout)
    return "LLVM " + (m.group(1) if m else "?")


def const(name, prefix=""):
    n = name
    if prefix and n.startswith(prefix):
        n = n[len(prefix):]
    return n.upper()


def write_tables(names, vopdx, vopdy):
    # The VALU opcode space is VOP3's (10 bits): VOPC op, VOP2 op + 0x100, VOP1 op + 0x180.
    valu = dict(names["vop3"])
    for op, n in names["vopc"].items():
        valu.setdefault(op, n)
    for op, n in names["vop2"].items():
        valu.setdefault(0x100 + op, n)
    for op, n in names["vop1"].items():
        valu.setdefault(0x180 + op, n)
    mem = {}
    for seg in ["flat", "global", "scratch"]:
        for op, n in names[seg].items():
            mem.setdefault(op, n.split("_", 1)[1])
    valu_by_name = {n: op for op, n in valu.items()}
    with open(TABLES, "w") as f:
        f.write("// Generated by %s from LLVM 22's %s disassembler; do not edit.\n" % (SCRIPT, TABLES_DOC[0]))
        f.write("//! Opcode numbers and mnemonics of %s, per encoding.\n" % TABLES_DOC[1])
        f.write("#![allow(missing_docs)]\n\n")
        groups = [("sop1", names["sop1"], "s_"), ("sop2", names["sop2"], "s_"), ("sopk", names["sopk"], "s_"),
                  ("sopc", names["sopc"], "s_"), ("sopp", names["sopp"], "s_"), ("smem", names["smem"], "s_"),
                  ("valu", valu, "v_"), ("vop3p", names["vop3p"], "v_"), ("ds", names["ds"], "ds_"),
                  ("flat", mem, ""), ("mubuf", names["mubuf"], "buffer_"), ("mtbuf", names["mtbuf"], "tbuffer_")]
        for mod, tab, prefix in groups:
            f.write("/// Opcodes of the %s encoding%s.\n" % (mod.upper(), " (VOP3 numbering)" if mod == "valu" else ""))
            f.write("pub mod %s {\n" % mod)
            for op in sorted(tab):
                f.write("    pub const %s: u16 = 0x%x;\n" % (const(tab[op], prefix), op))
            f.write("    /// Mnemonic of each opcode number LLVM knows.\n")
            f.write("    pub const NAMES: &[(u16, &str)] = &[\n")
            for op in sorted(tab):
                f.write("        (0x%x, \"%s\"),\n" % (op, tab[op]))
            f.write("    ];\n}\n\n")
        f.write("/// Operand shapes in LLVM's operand order, per encoding and opcode: one token per\n")
        f.write("/// operand, the register count ('1'..'16'), 'h' for a 16-bit VGPR half, 'x' otherwise.\n")
        f.write("pub mod shapes {\n")
        for enc in sorted(shapes):
            f.write("    pub const %s: &[(u16, &str)] = &[\n" % enc.upper())
            for op in sorted(shapes[enc]):
                f.write("        (0x%x, \"%s\"),\n" % (op, shapes[enc][op]))
            f.write("    ];\n")
        f.write("}\n\n")
        for mod, names_by_name, src in [("flat_segment", names["flat"], "flat"), ("global_segment", names["global"], "global"),
                                        ("scratch_segment", names["scratch"], "scratch")]:
            f.write("/// Opcode numbers that exist with the %s segment.\n" % src)
            f.write("pub const %s_OPS: &[u16] = &[%s];\n\n" % (src.upper(), ", ".join("0x%x" % o for o in sorted(names_by_name))))
        for mod, tab in [("VOPD_X", vopdx), ("VOPD_Y", vopdy)]:
            f.write("/// VOPD %s opcode -> VALU opcode (VOP3 numbering).\n" % mod[-1])
            f.write("pub const %s: &[(u8, u16)] = &[\n" % mod)
            for op in sorted(tab):
                n = tab[op]
                vop = valu_by_name.get(n)
                if vop is None:
                    # v_dual_fmaak/fmamk/cndmask etc. map to their VOP2 names.
                    # The dot2acc forms without a VOP1/2/3 twin get pseudo opcodes.
                    vop = valu_by_name.get(n + "_e32", {"v_dot2acc_f32_f16": 0xFFFE}.get(n, 0xFFFF))
                f.write("    (0x%x, 0x%x), // %s\n" % (op, vop, n))
            f.write("];\n\n")


if __name__ == "__main__":
    main()
