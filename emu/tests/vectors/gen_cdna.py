#!/usr/bin/env python3
"""Regenerates the CDNA3/CDNA4 (gfx942, gfx950) decoder tables and test vectors from LLVM 22.

The sibling of gen.py (gfx1100), with the GFX9-family encodings:

Step 1 asks LLVM's disassembler which mnemonic each opcode number of each encoding has, by
disassembling instruction words built with each opcode and a few operand patterns (also the
SDWA, DPP, AccVGPR and MFMA forms):
    llvm-mc-22 --disassemble -triple=amdgcn-amd-amdhsa -mcpu=gfx942 --show-encoding
Step 2 re-assembles every text LLVM printed with
    llvm-mc-22 -triple=amdgcn-amd-amdhsa -mcpu=gfx942 --show-encoding
and writes `text ; encoding: [bytes]` lines to gfx942.txt (and the same for gfx950 to
gfx950.txt): the vectors the decoder tests read, so tests never need llvm-mc.
Step 3 writes emu/src/cdna3/opcodes.rs: per encoding, opcode number -> mnemonic and operand
shape for gfx942, and the differences of gfx950 (opcodes it adds, renames or drops).

Run from the repository root:  python3 emu/tests/vectors/gen_cdna.py
"""
import os, re, subprocess, sys, tempfile

MC = "llvm-mc-22"
TRIPLE = "-triple=amdgcn-amd-amdhsa"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
CPUS = ["gfx942", "gfx950"]


def le(*words):
    return ",".join("0x%02x" % ((w >> (8 * i)) & 0xFF) for w in words for i in range(4))


def classify(words):
    """(encoding, opcode) of an instruction's first dword, per the GFX9 encoding prefixes."""
    w = words[0]
    if w >> 23 == 0x17D: return "sop1", (w >> 8) & 0xFF
    if w >> 23 == 0x17E: return "sopc", (w >> 16) & 0x7F
    if w >> 23 == 0x17F: return "sopp", (w >> 16) & 0x7F
    if w >> 28 == 0xB: return "sopk", (w >> 23) & 0x1F
    if w >> 30 == 2: return "sop2", (w >> 23) & 0x7F
    if w >> 25 == 0x3F: return "vop1", (w >> 9) & 0xFF
    if w >> 25 == 0x3E: return "vopc", (w >> 17) & 0xFF
    if w >> 31 == 0: return "vop2", (w >> 25) & 0x3F
    if w >> 23 == 0x1A7: return "vop3p", (w >> 16) & 0x7F
    if w >> 26 == 0x34: return "vop3", (w >> 16) & 0x3FF
    if w >> 26 == 0x30: return "smem", (w >> 18) & 0xFF
    if w >> 26 == 0x36: return "ds", (w >> 17) & 0xFF
    if w >> 26 == 0x37: return ["flat", "scratch", "global", "?"][(w >> 14) & 3], (w >> 18) & 0x7F
    if w >> 26 == 0x38: return "mubuf", (w >> 18) & 0x7F
    if w >> 26 == 0x3A: return "mtbuf", (w >> 15) & 0xF
    return "?", None


def run_disassembler(cpu, cands):
    """LLVM's output for the candidates. llvm-mc-22 crashes on a few words (a literal operand
    of v_accvgpr_mov_b32, for one): a crashing batch is split until the culprits are left out."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.txt")
        with open(path, "w") as f:
            for w in cands:
                f.write(le(*w) + "\n")
        r = subprocess.run([MC, "--disassemble", TRIPLE, "-mcpu=" + cpu, "--show-encoding", path],
                           capture_output=True, text=True)
    if r.returncode == 0:
        return r.stdout
    if len(cands) == 1:
        return ""
    half = len(cands) // 2
    return run_disassembler(cpu, cands[:half]) + run_disassembler(cpu, cands[half:])


def disassemble(cpu, cands):
    """cands: list of word tuples. Returns {(encoding, op): [text]} for what LLVM decodes."""
    out = {}
    for line in run_disassembler(cpu, cands).splitlines():
        m = re.match(r"\s*(.*?)\s*; encoding: \[(.*)\]", line)
        if m:
            b = [int(x, 16) for x in m.group(2).split(",")]
            words = [b[i] | b[i + 1] << 8 | b[i + 2] << 16 | b[i + 3] << 24 for i in range(0, len(b) - 3, 4)]
            out.setdefault(classify(words), []).append(m.group(1))
    return out


def v(n):
    return 256 + n


# Operand patterns per encoding: functions of the opcode giving instruction words.
ENC = {
    "sop2": (range(0, 0x60), [
        lambda op: (0x80000000 | op << 23 | 5 << 16 | 3 << 8 | 2,),
        lambda op: (0x80000000 | op << 23 | 4 << 16 | 6 << 8 | 2,),
        lambda op: (0x80000000 | op << 23 | 6 << 16 | 0xC1 << 8 | 0x82,),
        lambda op: (0x80000000 | op << 23 | 5 << 16 | 3 << 8 | 0xFF, 0xDEADBEEF)]),
    "sopk": (range(0, 0x1D), [
        lambda op: (0xB0000000 | op << 23 | 5 << 16 | 0x1234,),
        lambda op: (0xB0000000 | op << 23 | 4 << 16 | 0x0003,),
        lambda op: (0xB0000000 | op << 23 | 4 << 16 | 0xF814,),
        lambda op: (0xB0000000 | op << 23 | 4 << 16 | 0x1805,)]),
    "sop1": (range(0, 0x100), [
        lambda op: (0xBE800000 | 5 << 16 | op << 8 | 2,),
        lambda op: (0xBE800000 | 4 << 16 | op << 8 | 6,),
        lambda op: (0xBE800000 | 0 << 16 | op << 8 | 0x80,),
        lambda op: (0xBE800000 | 0x80 << 16 | op << 8 | 0x80,),
        lambda op: (0xBE800000 | 0x7C << 16 | op << 8 | 2,),
        lambda op: (0xBE800000 | 4 << 16 | op << 8 | 0xFF, 0x12345)]),
    "sopc": (range(0, 0x80), [
        lambda op: (0xBF000000 | op << 16 | 3 << 8 | 2,),
        lambda op: (0xBF000000 | op << 16 | 6 << 8 | 4,),
        lambda op: (0xBF000000 | op << 16 | 0xFF << 8 | 2, 0x10000)]),
    "sopp": (range(0, 0x80), [
        lambda op: (0xBF800000 | op << 16 | 0x0003,),
        lambda op: (0xBF800000 | op << 16 | 0x0000,),
        lambda op: (0xBF800000 | op << 16 | 0x0091,),
        lambda op: (0xBF800000 | op << 16 | 0x0F70,),
        lambda op: (0xBF800000 | op << 16 | 0xC07F,),
        lambda op: (0xBF800000 | op << 16 | 0xFFFD,)]),
    "smem": (range(0, 0x100), [
        lambda op: (0xC0020000 | op << 18 | 8 << 6 | 2, 0x10),
        lambda op: (0xC0000000 | op << 18 | 8 << 6 | 2, 0x6),
        lambda op: (0xC0024000 | op << 18 | 8 << 6 | 2, 0x0A000010),
        lambda op: (0xC0030000 | op << 18 | 4 << 6 | 2, 0x20),
        lambda op: (0xC0020000 | op << 18 | 0 << 6 | 0, 0)]),
    "vop1": (range(0, 0x100), [
        lambda op: (0x7E000000 | 2 << 17 | op << 9 | v(4),),
        lambda op: (0x7E000000 | 2 << 17 | op << 9 | 3,),
        lambda op: (0x7E000000 | 0 << 17 | op << 9 | 0,),
        lambda op: (0x7E000000 | 2 << 17 | op << 9 | 0xFF, 0x3F800001)]),
    "vop2": (range(0, 0x3F), [
        lambda op: (op << 25 | 2 << 17 | 6 << 9 | v(4),),
        lambda op: (op << 25 | 2 << 17 | 6 << 9 | 4,),
        lambda op: (op << 25 | 2 << 17 | 6 << 9 | 0xF2,),
        lambda op: (op << 25 | 2 << 17 | 6 << 9 | 0xFF, 0x12345678),
        lambda op: (op << 25 | 2 << 17 | 6 << 9 | v(4), 0x3C00)]),
    "vopc": (range(0, 0x100), [
        lambda op: (0x7C000000 | op << 17 | 6 << 9 | v(4),),
        lambda op: (0x7C000000 | op << 17 | 6 << 9 | 4,),
        lambda op: (0x7C000000 | op << 17 | 6 << 9 | 0xFF, 0x4048F5C3)]),
    "vop3": (range(0, 0x380), [
        lambda op: (0xD0000000 | op << 16 | 2, v(4) | v(6) << 9 | v(8) << 18),
        lambda op: (0xD0000000 | op << 16 | 2, 4 | v(6) << 9 | v(8) << 18),
        lambda op: (0xD0000000 | op << 16 | 6 << 8 | 2, v(4) | v(6) << 9 | v(8) << 18),
        lambda op: (0xD0000000 | op << 16 | 1 << 8 | 2, v(4) | 0x80 << 9 | v(8) << 18 | 1 << 29),
        lambda op: (0xD0000000 | op << 16 | 0x6A << 8 | 2, v(4) | v(6) << 9 | 0x6A << 18),
        lambda op: (0xD0000000 | op << 16 | 2, v(4) | 6 << 9 | 0x80 << 18),
        lambda op: (0xD0000000 | op << 16 | 1 << 15 | 2, v(4) | v(6) << 9 | v(8) << 18 | 1 << 27),
        lambda op: (0xD0000000 | op << 16 | 2, 4 | 6 << 9 | 0x80 << 18),
        lambda op: (0xD0000000 | op << 16 | 2, 4 | 0x81 << 9 | v(8) << 18)]),
    "vop3p": (range(0, 0x80), [
        lambda op: (0xD3800000 | op << 16 | 1 << 14 | 2, v(4) | v(6) << 9 | v(8) << 18 | 3 << 27),
        lambda op: (0xD3800000 | op << 16 | 1 << 14 | 2, v(4) | v(6) << 9 | v(8) << 18 | 1 << 27),
        lambda op: (0xD3800000 | op << 16 | 2, v(4) | v(8) << 9 | v(12) << 18),
        lambda op: (0xD3800000 | op << 16 | 1 << 14 | 1 << 11 | 2, v(4) | v(6) << 9 | v(8) << 18 | 2 << 27 | 1 << 29),
        # MFMA: AGPR accumulator (acc_cd), VGPR accumulator, cbsz/abid/blgp, AGPR sources.
        lambda op: (0xD3800000 | op << 16 | 1 << 15, v(0) | v(8) << 9 | v(0) << 18),
        lambda op: (0xD3800000 | op << 16 | 32, v(0) | v(8) << 9 | v(32) << 18),
        lambda op: (0xD3800000 | op << 16 | 1 << 15 | 2 << 11 | 1 << 8, v(0) | v(8) << 9 | v(0) << 18 | 3 << 29),
        lambda op: (0xD3800000 | op << 16 | 1 << 15, v(16) | v(24) << 9 | v(0) << 18 | 3 << 27),
        lambda op: (0xD3800000 | op << 16 | 1 << 15, v(0) | v(8) << 9 | 0x80 << 18),
        # v_accvgpr_read/write and sparse MFMA index operands.
        lambda op: (0xD3800000 | op << 16 | 1 << 14 | 1, v(2) | 3 << 27),
        lambda op: (0xD3800000 | op << 16 | 1 << 14 | 1, 2 | 3 << 27),
        lambda op: (0xD3800000 | op << 16, v(0) | v(8) << 9 | v(20) << 18)]),
    "ds": (range(0, 0x100), [
        lambda op: (0xD8000000 | op << 17 | 0x10, 6 << 24 | 3 << 16 | 2 << 8 | 1),
        lambda op: (0xD8000000 | op << 17 | 0x0201, 6 << 24 | 3 << 16 | 2 << 8 | 1),
        lambda op: (0xD8000000 | op << 17 | 0x10, 6 << 24 | 4 << 16 | 2 << 8 | 1),
        lambda op: (0xD8000000 | op << 17 | 0x10, 0 << 24 | 0 << 16 | 2 << 8 | 1),
        lambda op: (0xD8000000 | op << 17 | 0x10, 6 << 24 | 0 << 16 | 0 << 8 | 1),
        lambda op: (0xD8000000 | op << 17 | 0x10, 8 << 24 | 0 << 16 | 2 << 8 | 1),
        lambda op: (0xD8000000 | op << 17 | 0x10, 0 << 24 | 4 << 16 | 2 << 8 | 1),
        lambda op: (0xD8000000 | op << 17 | 1 << 25 | 0x10, 8 << 24 | 4 << 16 | 2 << 8 | 1),
        lambda op: (0xD8000000 | op << 17 | 1 << 16 | 0x10, 6 << 24 | 0 << 16 | 2 << 8 | 1)]),
    "flat": (range(0, 0x80), [
        lambda op: (0xDC000000 | op << 18 | 0 << 14 | 0x10, 6 << 24 | 0x7F << 16 | 2 << 8 | 4),
        lambda op: (0xDC000000 | op << 18 | 0 << 14 | 0x10, 6 << 24 | 0x00 << 16 | 4 << 8 | 2),
        lambda op: (0xDC000000 | op << 18 | 0 << 14 | 1 << 16 | 0x10, 6 << 24 | 0x00 << 16 | 4 << 8 | 2),
        lambda op: (0xDC000000 | op << 18 | 0 << 14 | 0x10, 6 << 24 | 1 << 23 | 0x00 << 16 | 4 << 8 | 2)]),
    "scratch": (range(0, 0x80), [
        lambda op: (0xDC000000 | op << 18 | 1 << 14 | 0x10, 6 << 24 | 2 << 16 | 4 << 8 | 1),
        lambda op: (0xDC000000 | op << 18 | 1 << 14 | 1 << 13 | 0x10, 6 << 24 | 0x7F << 16 | 4 << 8 | 1),
        lambda op: (0xDC000000 | op << 18 | 1 << 14 | 0x1FF0, 6 << 24 | 2 << 16 | 4 << 8 | 1),
        lambda op: (0xDC000000 | op << 18 | 1 << 14 | 1 << 25 | 1 << 17 | 0x10, 6 << 24 | 1 << 23 | 2 << 16 | 4 << 8 | 1)]),
    "global": (range(0, 0x80), [
        lambda op: (0xDC000000 | op << 18 | 2 << 14 | 0x10, 6 << 24 | 2 << 16 | 4 << 8 | 1),
        lambda op: (0xDC000000 | op << 18 | 2 << 14 | 0x10, 6 << 24 | 0x7F << 16 | 4 << 8 | 2),
        lambda op: (0xDC000000 | op << 18 | 2 << 14 | 0x1FF0, 6 << 24 | 2 << 16 | 8 << 8 | 1),
        lambda op: (0xDC000000 | op << 18 | 2 << 14 | 1 << 16 | 0x10, 6 << 24 | 2 << 16 | 4 << 8 | 1),
        lambda op: (0xDC000000 | op << 18 | 2 << 14 | 1 << 16 | 0x10, 6 << 24 | 0x7F << 16 | 4 << 8 | 2),
        lambda op: (0xDC000000 | op << 18 | 2 << 14 | 1 << 25 | 1 << 17 | 0x10, 6 << 24 | 1 << 23 | 0x7F << 16 | 4 << 8 | 2),
        lambda op: (0xDC000000 | op << 18 | 2 << 14 | 1 << 13 | 0x10, 6 << 24 | 0x7F << 16 | 4 << 8 | 2)]),
    "mubuf": (range(0, 0x80), [
        lambda op: (0xE0000000 | op << 18 | 0x10, 0x80 << 24 | 1 << 16 | 4 << 8 | 1),
        lambda op: (0xE0000000 | op << 18 | 1 << 12 | 0x10, 3 << 24 | 1 << 16 | 4 << 8 | 1),
        lambda op: (0xE0000000 | op << 18 | 1 << 13 | 1 << 14 | 0x10, 0x80 << 24 | 1 << 23 | 1 << 16 | 4 << 8 | 1),
        lambda op: (0xE0000000 | op << 18 | 3 << 12 | 1 << 15 | 1 << 17 | 0x10, 0x80 << 24 | 1 << 16 | 4 << 8 | 2),
        lambda op: (0xE0000000 | op << 18 | 1 << 16 | 0x10, 0x80 << 24 | 1 << 16 | 4 << 8 | 1)]),
    "mtbuf": (range(0, 0x10), [
        lambda op: (0xE8000000 | op << 15 | 4 << 23 | 1 << 19 | 0x10, 0x80 << 24 | 1 << 16 | 4 << 8 | 1),
        lambda op: (0xE8000000 | op << 15 | 1 << 19 | 1 << 12 | 0x10, 3 << 24 | 1 << 16 | 4 << 8 | 1)]),
}

# DPP controls: quad_perm, row_shl/shr/ror, wave_shl/rol/shr/ror, mirrors, row_bcast, and
# the gfx90a row_newbcast.
DPP_CTRLS = [0x1B, 0xE4, 0x101, 0x10F, 0x111, 0x11F, 0x121, 0x12F, 0x130, 0x134, 0x138, 0x13C,
             0x140, 0x141, 0x142, 0x143, 0x150, 0x15F]


def split_operands(t):
    """Operands of an instruction text, at parenthesis/bracket depth 0, without trailing modifiers."""
    parts = t.split(None, 1)
    if len(parts) < 2:
        return []
    ops, cur, depth = [], "", 0
    for ch in parts[1]:
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
    ops[-1] = ops[-1].split(" ")[0]
    return [o for o in ops if o]


def shape_of(t):
    """One token per operand: register count ('1'..'16'), 'x' for anything but a register."""
    out = []
    for o in split_operands(t):
        o = o.strip("-|")
        o = re.sub(r"^(neg|abs|sext)\((.*)\)$", r"\2", o).strip("-|")
        m = re.match(r"^(v|s|a|ttmp)\[(\d+):(\d+)\]$", o)
        if m:
            out.append(str(int(m.group(3)) - int(m.group(2)) + 1))
        elif re.match(r"^(v|s|a|ttmp)\d+$", o) or o in ("vcc_lo", "vcc_hi", "m0", "exec_lo", "exec_hi",
                                                         "flat_scratch_lo", "flat_scratch_hi"):
            out.append("1")
        elif o in ("vcc", "exec", "flat_scratch", "xnack_mask"):
            out.append("2")
        else:
            out.append("x")
    return ",".join(out)


def base_name(t):
    return re.sub(r"_(e32|e64|dpp|sdwa)$", "", t.split()[0])


def tables(cpu):
    """Names and shapes per (encoding, opcode), plus every text LLVM printed."""
    names, shapes, texts = {}, {}, []
    for enc, (ops, pats) in ENC.items():
        got = disassemble(cpu, [p(op) for op in ops for p in pats])
        for (e, op), ts in sorted(got.items(), key=str):
            if e == "?":
                continue  # graphics-only encodings (EXP, MIMG, VINTRP) met in leftover words
            for t in ts:
                names.setdefault(e, {}).setdefault(op, base_name(t))
                # The text with the most register operands tells the most widths.
                sh = shape_of(t)
                cur = shapes.setdefault(e, {}).get(op)
                if cur is None or sh.count("x") < cur.count("x") or (
                        sh.count("x") == cur.count("x") and len(sh) > len(cur)):
                    shapes[e][op] = sh
                texts.append(t)
    # SDWA and DPP forms of VOP1/VOP2/VOPC.
    extra = []
    for op in names.get("vop2", {}):
        for c in DPP_CTRLS:
            extra.append((op << 25 | 2 << 17 | 6 << 9 | 0xFA, 0xF5000000 | c << 8 | 4))
        extra.append((op << 25 | 2 << 17 | 6 << 9 | 0xFA, 0xFF000000 | 0x1B << 8 | 1 << 19 | 1 << 20 | 1 << 23 | 4))
        extra.append((op << 25 | 2 << 17 | 6 << 9 | 0xF9, 4 | 5 << 8 | 2 << 11 | 1 << 16 | 4 << 24))
        extra.append((op << 25 | 2 << 17 | 6 << 9 | 0xF9, 4 | 6 << 8 | 3 << 16 | 1 << 19 | 1 << 20 | 5 << 24 | 1 << 29))
        extra.append((op << 25 | 2 << 17 | 6 << 9 | 0xF9, 4 | 0 << 8 | 1 << 11 | 1 << 13 | 1 << 14 | 6 << 16 | 1 << 23 | 6 << 24))
    for op in names.get("vop1", {}):
        extra.append((0x7E000000 | 2 << 17 | op << 9 | 0xFA, 0xFF000000 | 0x111 << 8 | 4))
        extra.append((0x7E000000 | 2 << 17 | op << 9 | 0xFA, 0xFF000000 | 0x142 << 8 | 1 << 21 | 4))
        extra.append((0x7E000000 | 2 << 17 | op << 9 | 0xF9, 4 | 5 << 8 | 2 << 11 | 1 << 16 | 1 << 19))
        extra.append((0x7E000000 | 2 << 17 | op << 9 | 0xF9, 4 | 6 << 8 | 6 << 16 | 1 << 20 | 1 << 21))
    for op in names.get("vopc", {}):
        extra.append((0x7C000000 | op << 17 | 6 << 9 | 0xF9, 4 | 1 << 16 | 4 << 24))
        extra.append((0x7C000000 | op << 17 | 6 << 9 | 0xF9, 4 | (0x80 | 8) << 8 | 2 << 16 | 1 << 19 | 6 << 24 | 1 << 28))
        extra.append((0x7C000000 | op << 17 | 6 << 9 | 0xFA, 0xFF000000 | 0x1B << 8 | 4))
    for (e, _), ts in disassemble(cpu, extra).items():
        if e != "?":
            texts.extend(ts)
    return names, shapes, texts


def write_vectors(cpu, texts):
    seen, uniq = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            uniq.append(t)
    asm_cmd = [MC, TRIPLE, "-mcpu=" + cpu, "--show-encoding"]
    r = subprocess.run(asm_cmd, input="\n".join(uniq) + "\n", capture_output=True, text=True)
    vecs = []
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(.*?)\s*; encoding: \[(.*)\]", line)
        if m:
            vecs.append((m.group(1), m.group(2)))
    with open(os.path.join(HERE, cpu + ".txt"), "w") as f:
        f.write("# Generated by emu/tests/vectors/gen_cdna.py; do not edit.\n")
        f.write("# Assembled by: " + " ".join(asm_cmd) + " (" + version() + ")\n")
        f.write("# Inputs: the texts printed by: " + " ".join([MC, "--disassemble", TRIPLE, "-mcpu=" + cpu, "--show-encoding"]) + "\n")
        f.write("# Format: <assembly text> ; encoding: [<bytes>]\n")
        for t, e in vecs:
            f.write("%s ; encoding: [%s]\n" % (t, e))
    return len(vecs)


def version():
    r = subprocess.run([MC, "--version"], capture_output=True, text=True)
    m = re.search(r"LLVM version (\S+)", r.stdout)
    return "LLVM " + (m.group(1) if m else "?")


ENCS = ["sop1", "sop2", "sopk", "sopc", "sopp", "smem", "vop1", "vop2", "vopc", "vop3", "vop3p",
        "ds", "flat", "global", "scratch", "mubuf", "mtbuf"]


def main():
    per_cpu = {}
    for cpu in CPUS:
        names, shapes, texts = tables(cpu)
        n = write_vectors(cpu, texts)
        per_cpu[cpu] = (names, shapes)
        print("%s: %d vectors, opcodes %s" % (cpu, n, {e: len(names.get(e, {})) for e in ENCS}), file=sys.stderr)
    base_names, base_shapes = per_cpu["gfx942"]
    new_names, new_shapes = per_cpu["gfx950"]
    path = os.path.join(ROOT, "emu", "src", "cdna3", "opcodes.rs")
    with open(path, "w") as f:
        f.write("// Generated by emu/tests/vectors/gen_cdna.py from LLVM 22's gfx942 and gfx950\n")
        f.write("// disassemblers (%s); do not edit.\n" % version())
        f.write("//! Opcode numbers, mnemonics and operand shapes of gfx942 (CDNA3) per encoding, and\n")
        f.write("//! what gfx950 (CDNA4) changes. A shape has one token per operand in LLVM's order: the\n")
        f.write("//! register count ('1'..'16'), or 'x' for anything else.\n\n")
        f.write("/// `(opcode, mnemonic, shape)` of every gfx942 opcode, per encoding, sorted by opcode.\n")
        f.write("pub mod gfx942 {\n")
        for e in ENCS:
            tab = base_names.get(e, {})
            f.write("    /// %s.\n" % e.upper())
            f.write("    pub const %s: &[(u16, &str, &str)] = &[\n" % e.upper())
            for op in sorted(tab):
                f.write("        (0x%x, \"%s\", \"%s\"),\n" % (op, tab[op], base_shapes[e][op]))
            f.write("    ];\n")
        f.write("}\n\n")
        f.write("/// gfx950 opcodes that are new or differ from gfx942: `(encoding, opcode, mnemonic, shape)`.\n")
        f.write("pub const GFX950_CHANGED: &[(&str, u16, &str, &str)] = &[\n")
        for e in ENCS:
            for op in sorted(new_names.get(e, {})):
                n, s = new_names[e][op], new_shapes[e][op]
                if base_names.get(e, {}).get(op) != n or base_shapes[e].get(op) != s:
                    f.write("    (\"%s\", 0x%x, \"%s\", \"%s\"),\n" % (e, op, n, s))
        f.write("];\n\n")
        f.write("/// gfx942 opcodes that gfx950 does not have: `(encoding, opcode)`.\n")
        f.write("pub const GFX950_REMOVED: &[(&str, u16)] = &[\n")
        for e in ENCS:
            for op in sorted(base_names.get(e, {})):
                if op not in new_names.get(e, {}):
                    f.write("    (\"%s\", 0x%x),\n" % (e, op))
        f.write("];\n")
    subprocess.run(["rustfmt", "--edition", "2024", "--config", "max_width=100", path], check=True)


if __name__ == "__main__":
    main()
