#!/usr/bin/env python3
"""Regenerates the WMMA test vectors from LLVM 22: every v_wmma_* form of gfx1100 (RDNA3) and
gfx1201 (RDNA4) with the modifiers that change what it computes (neg_lo/neg_hi, op_sel,
clamp, an inline-constant C, D apart from or on C).

Each text is assembled with
    llvm-mc-22 -triple=amdgcn-amd-amdhsa -mcpu=CPU --show-encoding
and written as `text ; encoding: [bytes]` to wmma_gfx1100.txt and wmma_gfx1201.txt; the tests
decode and print every line (tests/integration/vectors.rs) and run it in wave32 and wave64 against a
reference of the documented layouts (src/interp/wmma/tests.rs). The script also checks, with
    llvm-mc-22 --disassemble ... -mattr=+wavefrontsize64
that each encoding is the same instruction in wave64 (only the register counts LLVM prints
differ), which is why the tests run the same words in both wave sizes; and that gfx1200
assembles every gfx1201 text to the same bytes.

Run from the repository root:  python3 emu/tests/vectors/gen_wmma.py
"""
import os, re, subprocess, sys, tempfile

MC = "llvm-mc-22"
HERE = os.path.dirname(os.path.abspath(__file__))

# (mnemonic, A/B registers in wave32, C/D registers in wave32, kind) per target.
GFX11 = [
    ("v_wmma_f32_16x16x16_f16", 8, 8, "f32"),
    ("v_wmma_f32_16x16x16_bf16", 8, 8, "f32"),
    ("v_wmma_f16_16x16x16_f16", 8, 8, "h"),
    ("v_wmma_bf16_16x16x16_bf16", 8, 8, "h"),
    ("v_wmma_i32_16x16x16_iu8", 4, 8, "int"),
    ("v_wmma_i32_16x16x16_iu4", 2, 8, "int"),
]
GFX12 = [
    ("v_wmma_f32_16x16x16_f16", 4, 8, "f32"),
    ("v_wmma_f32_16x16x16_bf16", 4, 8, "f32"),
    ("v_wmma_f16_16x16x16_f16", 4, 4, "h"),
    ("v_wmma_bf16_16x16x16_bf16", 4, 4, "h"),
    ("v_wmma_i32_16x16x16_iu8", 2, 8, "int"),
    ("v_wmma_i32_16x16x16_iu4", 1, 8, "int"),
    ("v_wmma_i32_16x16x32_iu4", 2, 8, "int"),
    ("v_wmma_f32_16x16x16_fp8_fp8", 2, 8, "f8"),
    ("v_wmma_f32_16x16x16_fp8_bf8", 2, 8, "f8"),
    ("v_wmma_f32_16x16x16_bf8_fp8", 2, 8, "f8"),
    ("v_wmma_f32_16x16x16_bf8_bf8", 2, 8, "f8"),
]


def regs(first, n):
    return "v%d" % first if n == 1 else "v[%d:%d]" % (first, first + n - 1)


def texts(forms, gfx12):
    out = []
    for name, ab, cd, kind in forms:
        a, b, c = regs(40, ab), regs(48, ab), regs(16, cd)
        d_apart = regs(0, cd)
        plain = "%s %s, %s, %s, %s" % (name, c, a, b, c)
        out.append(plain)
        out.append("%s %s, %s, %s, %s" % (name, d_apart, a, b, c))
        if kind in ("f32", "h"):
            out.append(plain + " neg_lo:[1,0,0]")
            out.append(plain + " neg_hi:[0,1,0]")
            out.append(plain + " neg_lo:[1,1,0] neg_hi:[1,1,0]")
            out.append(plain + " neg_lo:[0,0,1]")
            out.append(plain + " neg_hi:[0,0,1]")
            out.append(plain + " neg_lo:[0,0,1] neg_hi:[0,0,1]")
            out.append("%s %s, %s, %s, 1.0" % (name, d_apart, a, b))
            if kind == "f32":
                out.append("%s %s, %s, %s, -2.0" % (name, d_apart, a, b))
            out.append("%s %s, %s, %s, 0" % (name, d_apart, a, b))
        if kind == "h" and not gfx12:
            out.append(plain + " op_sel:[0,0,1]")
            out.append(plain + " op_sel:[0,0,1] neg_lo:[0,1,0] neg_hi:[0,0,1]")
            # op_sel[0] has no documented meaning for WMMA: the emulator refuses it.
            out.append(plain + " op_sel:[1,0,0]")
        if kind == "int":
            out.append(plain + " neg_lo:[1,0,0]")
            out.append(plain + " neg_lo:[0,1,0]")
            out.append(plain + " neg_lo:[1,1,0]")
            out.append(plain + " clamp")
            out.append(plain + " neg_lo:[1,1,0] clamp")
            out.append("%s %s, %s, %s, 1" % (name, d_apart, a, b))
            out.append("%s %s, %s, %s, -7 clamp" % (name, d_apart, a, b))
        if kind == "f8":
            # LLVM takes no negation of 8-bit float sources, but C's neg and abs.
            out.append(plain + " neg_lo:[0,0,1]")
            out.append(plain + " neg_lo:[0,0,1] neg_hi:[0,0,1]")
            out.append("%s %s, %s, %s, 0.5" % (name, d_apart, a, b))
    return out


def assemble(cpu, lines, extra=()):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.s")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run([MC, "-triple=amdgcn-amd-amdhsa", "-mcpu=" + cpu, "--show-encoding",
                            *extra, path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("%s rejected:\n%s" % (cpu, r.stderr))
    got = []
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(v_wmma\S*.*?)\s*; encoding: (\[.*\])", line)
        if m:
            got.append((m.group(1), m.group(2)))
    if len(got) != len(lines):
        sys.exit("%s: %d texts, %d encodings" % (cpu, len(lines), len(got)))
    return got


def disassemble(cpu, encodings, extra=()):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.txt")
        with open(path, "w") as f:
            f.write("\n".join(e.strip("[]") for e in encodings) + "\n")
        r = subprocess.run([MC, "--disassemble", "-triple=amdgcn-amd-amdhsa", "-mcpu=" + cpu,
                            *extra, path], capture_output=True, text=True)
    return [l.strip() for l in r.stdout.splitlines() if l.strip().startswith("v_wmma")]


def without_registers(t):
    return re.sub(r"v\[\d+:\d+\]|v\d+", "v", t)


def main():
    version = subprocess.run([MC, "--version"], capture_output=True, text=True).stdout
    version = re.search(r"LLVM version (\S+)", version).group(1)
    for cpu, forms, gfx12 in (("gfx1100", GFX11, False), ("gfx1201", GFX12, True)):
        lines = texts(forms, gfx12)
        got = assemble(cpu, lines)
        w64 = disassemble(cpu, [e for _, e in got], ["-mattr=+wavefrontsize64"])
        if [without_registers(t) for t in w64] != [without_registers(t) for t, _ in got]:
            sys.exit("%s: wave64 disassembly is not the same instructions" % cpu)
        if gfx12 and [e for _, e in assemble("gfx1200", lines)] != [e for _, e in got]:
            sys.exit("gfx1200 and gfx1201 encode WMMA differently")
        path = os.path.join(HERE, "wmma_%s.txt" % cpu)
        with open(path, "w") as f:
            f.write("# Generated by emu/tests/vectors/gen_wmma.py; do not edit.\n")
            f.write("# Assembled by: %s -triple=amdgcn-amd-amdhsa -mcpu=%s --show-encoding (LLVM %s)\n"
                    % (MC, cpu, version))
            f.write("# Format: <assembly text> ; encoding: [<bytes>]\n")
            for t, e in got:
                f.write("%s ; encoding: %s\n" % (t, e))
        print("%s: %d vectors" % (path, len(got)))


if __name__ == "__main__":
    main()
