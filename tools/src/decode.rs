//! Packet decoders for `am ring`: PM4 type-3 (GFX9 and GFX10+ compute), AQL (64-byte HSA
//! packets, AMD's PM4-IB vendor packet), and SDMA (4.4 and 5+). Each takes the dwords of a
//! stream and a reader of GPU virtual memory, and follows indirect buffers.
//!
//! Layouts are the ones of Linux's `nvd.h`/`soc15d.h`, `hsa.h`/`amd_hsa_*` and
//! `sdma_v6_0_0_pkt_open.h`/`vega10_sdma_pkt_open.h`; the decoders are independent of the
//! runtime's encoders, which the tests use to write what is decoded.

use std::collections::HashMap;

use am_autogen::pm4::nvd as op;
use am_autogen::sdma_pkt::v6 as sd;
use serde::Serialize;

/// How deep indirect buffers are followed (an IB may chain to another).
const MAX_IB_DEPTH: usize = 3;
/// Largest IB read when following one, in dwords.
const MAX_IB_DWORDS: u32 = 1 << 16;

/// One decoded packet.
#[derive(Clone, Debug, Serialize)]
pub struct Packet {
    /// GPU virtual address of its first dword, hex.
    pub va: String,
    /// Packet name (`WAIT_REG_MEM`, `KERNEL_DISPATCH`, `COPY_LINEAR`, …).
    pub name: String,
    /// Decoded fields, in packet order.
    pub fields: Vec<(String, String)>,
    /// Dwords of the packet.
    pub dwords: usize,
    /// The packets of the indirect buffer it runs, when followed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ib: Vec<Packet>,
    /// Why decoding stopped here (a malformed packet, an unreadable IB).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Packet {
    fn new(va: u64, name: impl Into<String>, dwords: usize) -> Packet {
        Packet {
            va: format!("{va:#x}"),
            name: name.into(),
            fields: vec![],
            dwords,
            ib: vec![],
            error: None,
        }
    }
    fn f(&mut self, name: &str, value: impl Into<String>) {
        self.fields.push((name.to_string(), value.into()));
    }
}

/// What decoding needs from the device: memory by GPU VA, register names by dword address.
pub struct Env<'a> {
    /// Read `n` dwords at a GPU virtual address.
    pub read: &'a dyn Fn(u64, usize) -> anyhow::Result<Vec<u32>>,
    /// Register names by dword address (the GC registers of the first XCC).
    pub reg_names: &'a HashMap<u64, &'static str>,
    /// GFX9 (MI300) PM4 layouts.
    pub gfx9: bool,
    /// SDMA 5+ layouts.
    pub sdma_v5: bool,
}

fn hex(v: impl Into<u64>) -> String {
    format!("{:#x}", v.into())
}

fn addr64(lo: u32, hi: u32) -> u64 {
    u64::from(hi) << 32 | u64::from(lo)
}

fn bits(v: u32, lo: u32, width: u32) -> u32 {
    (v >> lo) & ((1u64 << width) - 1) as u32
}

/// The name of a PM4 type-3 opcode (the `PACKET3_*` names of `nvd.h`).
pub fn pm4_opcode_name(opcode: u32) -> Option<&'static str> {
    Some(match opcode {
        op::PACKET3_NOP => "NOP",
        op::PACKET3_SET_BASE => "SET_BASE",
        op::PACKET3_DISPATCH_DIRECT => "DISPATCH_DIRECT",
        op::PACKET3_DISPATCH_INDIRECT => "DISPATCH_INDIRECT",
        op::PACKET3_ATOMIC_MEM => "ATOMIC_MEM",
        op::PACKET3_PRED_EXEC => "PRED_EXEC",
        op::PACKET3_COND_EXEC => "COND_EXEC",
        op::PACKET3_INDIRECT_BUFFER => "INDIRECT_BUFFER",
        op::PACKET3_WRITE_DATA => "WRITE_DATA",
        op::PACKET3_WAIT_REG_MEM => "WAIT_REG_MEM",
        op::PACKET3_MEM_SEMAPHORE => "MEM_SEMAPHORE",
        op::PACKET3_COPY_DATA => "COPY_DATA",
        op::PACKET3_EVENT_WRITE => "EVENT_WRITE",
        op::PACKET3_RELEASE_MEM => "RELEASE_MEM",
        op::PACKET3_ACQUIRE_MEM => "ACQUIRE_MEM",
        op::PACKET3_DMA_DATA => "DMA_DATA",
        op::PACKET3_SET_CONFIG_REG => "SET_CONFIG_REG",
        op::PACKET3_SET_CONTEXT_REG => "SET_CONTEXT_REG",
        op::PACKET3_SET_SH_REG => "SET_SH_REG",
        op::PACKET3_SET_SH_REG_INDEX => "SET_SH_REG_INDEX",
        op::PACKET3_SET_UCONFIG_REG => "SET_UCONFIG_REG",
        op::PACKET3_INVALIDATE_TLBS => "INVALIDATE_TLBS",
        op::PACKET3_SET_RESOURCES => "SET_RESOURCES",
        op::PACKET3_MAP_QUEUES => "MAP_QUEUES",
        op::PACKET3_UNMAP_QUEUES => "UNMAP_QUEUES",
        op::PACKET3_QUERY_STATUS => "QUERY_STATUS",
        _ => return None,
    })
}

const WAIT_FUNCTIONS: [&str; 8] = ["always", "<", "<=", "==", "!=", ">=", ">", "reserved"];

/// Decode a PM4 stream of `words` that starts at `va`.
pub fn pm4(env: &Env<'_>, va: u64, words: &[u32], depth: usize) -> Vec<Packet> {
    let mut out = vec![];
    let mut i = 0usize;
    while i < words.len() {
        let at = va + i as u64 * 4;
        let h = words[i];
        let kind = h >> 30;
        if kind == 2 {
            // A type-2 packet is one dword of padding.
            out.push(Packet::new(at, "TYPE2_NOP", 1));
            i += 1;
            continue;
        }
        if kind != 3 {
            let mut p = Packet::new(at, format!("type-{kind} packet"), 1);
            p.error = Some(format!(
                "header {h:#010x}: compute queues take type-3 packets; decoding stops here"
            ));
            out.push(p);
            break;
        }
        let body_len = bits(h, 16, 14) as usize + 1;
        let opcode = bits(h, 8, 8);
        let name =
            pm4_opcode_name(opcode).map_or(format!("PM4 opcode {opcode:#04x}"), str::to_string);
        let mut p = Packet::new(at, name, body_len + 1);
        let Some(body) = words.get(i + 1..i + 1 + body_len) else {
            p.error = Some(format!(
                "the packet needs {body_len} body dwords, {} remain before the write pointer",
                words.len() - i - 1
            ));
            out.push(p);
            break;
        };
        pm4_fields(env, opcode, body, &mut p, depth);
        out.push(p);
        i += 1 + body_len;
    }
    out
}

fn pm4_fields(env: &Env<'_>, opcode: u32, b: &[u32], p: &mut Packet, depth: usize) {
    let g = |k: usize| b.get(k).copied().unwrap_or(0);
    match opcode {
        op::PACKET3_SET_SH_REG
        | op::PACKET3_SET_UCONFIG_REG
        | op::PACKET3_SET_CONTEXT_REG
        | op::PACKET3_SET_CONFIG_REG
        | op::PACKET3_SET_SH_REG_INDEX => {
            let base = match opcode {
                op::PACKET3_SET_UCONFIG_REG => op::PACKET3_SET_UCONFIG_REG_START,
                op::PACKET3_SET_CONTEXT_REG => op::PACKET3_SET_CONTEXT_REG_START,
                op::PACKET3_SET_CONFIG_REG => op::PACKET3_SET_CONFIG_REG_START,
                _ => op::PACKET3_SET_SH_REG_START,
            };
            let first = u64::from(base) + u64::from(g(0) & 0xffff);
            for (k, v) in b.iter().skip(1).enumerate() {
                let addr = first + k as u64;
                let name = env
                    .reg_names
                    .get(&addr)
                    .map_or(format!("reg {addr:#x}"), |n| n.to_string());
                p.f(&name, hex(*v));
            }
        }
        op::PACKET3_WAIT_REG_MEM => {
            let f = g(0);
            let mem = bits(f, 4, 2) == 1;
            p.f("function", WAIT_FUNCTIONS[bits(f, 0, 3) as usize]);
            p.f("space", if mem { "memory" } else { "register" });
            p.f(
                "operation",
                if bits(f, 6, 2) == 1 {
                    "write, wait"
                } else {
                    "wait"
                },
            );
            if mem {
                p.f("addr", hex(addr64(g(1) & !3, g(2))));
            } else {
                let name = |a: u32| {
                    env.reg_names
                        .get(&u64::from(a))
                        .map_or(hex(a), |n| n.to_string())
                };
                p.f("register", name(g(1)));
                if bits(f, 6, 2) == 1 {
                    p.f("register2", name(g(2)));
                }
            }
            p.f("reference", hex(g(3)));
            p.f("mask", hex(g(4)));
            p.f("poll_interval", g(5).to_string());
        }
        op::PACKET3_RELEASE_MEM => {
            let (e, s) = (g(0), g(1));
            p.f("event", hex(bits(e, 0, 6)));
            p.f("event_index", bits(e, 8, 4).to_string());
            let data_sel = bits(s, 29, 3);
            p.f(
                "data_sel",
                ["none", "data32", "data64", "gpu clock", "clock counter"]
                    .get(data_sel as usize)
                    .copied()
                    .unwrap_or("reserved"),
            );
            p.f("int_sel", bits(s, 24, 3).to_string());
            p.f("addr", hex(addr64(g(2), g(3))));
            p.f("data", hex(addr64(g(4), g(5))));
        }
        op::PACKET3_ACQUIRE_MEM => {
            if env.gfx9 {
                p.f("coher_cntl", hex(g(0)));
                p.f("size", hex(addr64(g(1), g(2))));
                p.f("base", hex(addr64(g(3), g(4)) << 8));
            } else {
                p.f("size", hex(addr64(g(1), g(2))));
                p.f("base", hex(addr64(g(3), g(4)) << 8));
                p.f("gcr_cntl", hex(g(6)));
            }
            p.f("poll_interval", g(5).to_string());
        }
        op::PACKET3_DISPATCH_DIRECT => {
            p.f("groups", format!("{} x {} x {}", g(0), g(1), g(2)));
            p.f("initiator", hex(g(3)));
        }
        op::PACKET3_EVENT_WRITE => {
            p.f("event", hex(bits(g(0), 0, 6)));
            p.f("event_index", bits(g(0), 8, 4).to_string());
        }
        op::PACKET3_WRITE_DATA => {
            p.f("dst_sel", bits(g(0), 8, 4).to_string());
            p.f("addr", hex(addr64(g(1), g(2))));
            p.f(
                "data",
                b.iter()
                    .skip(3)
                    .map(|v| hex(*v))
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        op::PACKET3_COPY_DATA => {
            p.f("src_sel", bits(g(0), 0, 4).to_string());
            p.f("dst_sel", bits(g(0), 8, 4).to_string());
            p.f("src", hex(addr64(g(1), g(2))));
            p.f("dst", hex(addr64(g(3), g(4))));
        }
        op::PACKET3_INDIRECT_BUFFER => {
            let ib = addr64(g(0) & !3, g(1) & 0xffff);
            let n = g(2) & 0xf_ffff;
            p.f("addr", hex(ib));
            p.f("dwords", n.to_string());
            p.f("valid", (g(2) & op::INDIRECT_BUFFER_VALID != 0).to_string());
            follow(env, ib, n, depth, p, pm4);
        }
        op::PACKET3_NOP => {}
        _ => {
            for (k, v) in b.iter().enumerate() {
                p.f(&format!("dw{}", k + 1), hex(*v));
            }
        }
    }
}

fn follow(
    env: &Env<'_>,
    va: u64,
    dwords: u32,
    depth: usize,
    p: &mut Packet,
    decode: impl Fn(&Env<'_>, u64, &[u32], usize) -> Vec<Packet>,
) {
    if depth >= MAX_IB_DEPTH {
        p.error = Some(format!(
            "IBs nested deeper than {MAX_IB_DEPTH}: not followed"
        ));
        return;
    }
    if dwords == 0 || dwords > MAX_IB_DWORDS {
        p.error = Some(format!("IB of {dwords} dwords: not followed"));
        return;
    }
    match (env.read)(va, dwords as usize) {
        Ok(w) => p.ib = decode(env, va, &w, depth + 1),
        Err(e) => p.error = Some(format!("IB at {va:#x} not readable: {e:#}")),
    }
}

/// HSA packet type names (`hsa_packet_type_t`).
const AQL_TYPES: [&str; 6] = [
    "VENDOR_SPECIFIC",
    "INVALID",
    "KERNEL_DISPATCH",
    "BARRIER_AND",
    "AGENT_DISPATCH",
    "BARRIER_OR",
];
const FENCE_SCOPES: [&str; 4] = ["none", "agent", "system", "reserved"];

/// Decode 64-byte AQL packets (16 dwords each) starting at `va`.
pub fn aql(env: &Env<'_>, va: u64, words: &[u32]) -> Vec<Packet> {
    words
        .chunks(16)
        .enumerate()
        .map(|(k, w)| aql_one(env, va + k as u64 * 64, w))
        .collect()
}

fn aql_one(env: &Env<'_>, at: u64, w: &[u32]) -> Packet {
    let g = |k: usize| w.get(k).copied().unwrap_or(0);
    let header = g(0) & 0xffff;
    let kind = header & 0xff;
    let name = AQL_TYPES
        .get(kind as usize)
        .map_or(format!("AQL type {kind}"), |n| n.to_string());
    let mut p = Packet::new(at, name, 16);
    if w.len() < 16 {
        p.error = Some("a partial packet".into());
        return p;
    }
    p.f("barrier", bits(header, 8, 1).to_string());
    p.f("acquire", FENCE_SCOPES[bits(header, 9, 2) as usize]);
    p.f("release", FENCE_SCOPES[bits(header, 11, 2) as usize]);
    match kind {
        2 => {
            p.f("dimensions", bits(g(0), 16, 2).to_string());
            p.f(
                "workgroup",
                format!("{} x {} x {}", g(1) & 0xffff, g(1) >> 16, g(2) & 0xffff),
            );
            p.f("grid", format!("{} x {} x {}", g(3), g(4), g(5)));
            p.f("private_segment", g(6).to_string());
            p.f("group_segment", g(7).to_string());
            p.f("kernel_object", hex(addr64(g(8), g(9))));
            p.f("kernarg", hex(addr64(g(10), g(11))));
            p.f("completion_signal", hex(addr64(g(14), g(15))));
        }
        3 | 5 => {
            for k in 0..5 {
                let s = addr64(g(2 + 2 * k), g(3 + 2 * k));
                if s != 0 {
                    p.f(&format!("dep_signal{k}"), hex(s));
                }
            }
            p.f("completion_signal", hex(addr64(g(14), g(15))));
        }
        0 => {
            // AMD vendor packet (`AMD_AQL_FORMAT_PM4_IB` = 1): a PM4 INDIRECT_BUFFER in
            // dwords 1..4, then the dwords remaining.
            let format = g(0) >> 16;
            p.f("amd_format", format.to_string());
            if format == 1 {
                p.ib = pm4(env, at + 4, &w[1..5], 0);
                p.f("dw_cnt_remain", g(5).to_string());
                p.f("completion_signal", hex(addr64(g(14), g(15))));
            }
        }
        _ => {}
    }
    p
}

/// The name of an SDMA opcode (`SDMA_OP_*`).
pub fn sdma_opcode_name(opcode: u32) -> Option<&'static str> {
    Some(match opcode {
        sd::SDMA_OP_NOP => "NOP",
        sd::SDMA_OP_COPY => "COPY",
        sd::SDMA_OP_WRITE => "WRITE",
        sd::SDMA_OP_INDIRECT => "INDIRECT",
        sd::SDMA_OP_FENCE => "FENCE",
        sd::SDMA_OP_TRAP => "TRAP",
        sd::SDMA_OP_SEM => "SEM",
        sd::SDMA_OP_POLL_REGMEM => "POLL_REGMEM",
        sd::SDMA_OP_COND_EXE => "COND_EXE",
        sd::SDMA_OP_ATOMIC => "ATOMIC",
        sd::SDMA_OP_CONST_FILL => "CONST_FILL",
        sd::SDMA_OP_PTEPDE => "PTEPDE",
        sd::SDMA_OP_TIMESTAMP => "TIMESTAMP",
        sd::SDMA_OP_SRBM_WRITE => "SRBM_WRITE",
        sd::SDMA_OP_PRE_EXE => "PRE_EXE",
        sd::SDMA_OP_GCR_REQ => "GCR_REQ",
        _ => return None,
    })
}

/// Decode an SDMA stream of `words` that starts at `va`.
pub fn sdma(env: &Env<'_>, va: u64, words: &[u32], depth: usize) -> Vec<Packet> {
    let mut out = vec![];
    let mut i = 0usize;
    while i < words.len() {
        let at = va + i as u64 * 4;
        let w = &words[i..];
        let g = |k: usize| w.get(k).copied().unwrap_or(0);
        let h = g(0);
        let (opcode, sub) = (bits(h, 0, 8), bits(h, 8, 8));
        let len = match opcode {
            sd::SDMA_OP_NOP => 1 + bits(h, 16, 14) as usize,
            sd::SDMA_OP_COPY => 7,
            sd::SDMA_OP_WRITE => 4 + bits(g(3), 0, 20) as usize + 1,
            sd::SDMA_OP_INDIRECT => 6,
            sd::SDMA_OP_FENCE => 4,
            sd::SDMA_OP_TRAP => 2,
            sd::SDMA_OP_POLL_REGMEM => 6,
            sd::SDMA_OP_CONST_FILL => 5,
            sd::SDMA_OP_TIMESTAMP => 3,
            sd::SDMA_OP_GCR_REQ if env.sdma_v5 => 5,
            _ => 0,
        };
        let name =
            sdma_opcode_name(opcode).map_or(format!("SDMA opcode {opcode:#x}"), str::to_string);
        let mut p = Packet::new(at, name, len.max(1));
        if len == 0 {
            p.error = Some(format!(
                "header {h:#010x}: opcode {opcode:#x} sub-op {sub:#x} has no known length; decoding stops here"
            ));
            out.push(p);
            break;
        }
        if w.len() < len {
            p.error = Some(format!(
                "the packet needs {len} dwords, {} remain before the write pointer",
                w.len()
            ));
            out.push(p);
            break;
        }
        match opcode {
            sd::SDMA_OP_NOP if len > 1 => p.f("count", (len - 1).to_string()),
            sd::SDMA_OP_COPY => {
                p.name = if sub == 0 {
                    "COPY_LINEAR".into()
                } else {
                    format!("COPY sub-op {sub}")
                };
                let count = if env.sdma_v5 {
                    bits(g(1), 0, 30)
                } else {
                    bits(g(1), 0, 22)
                };
                p.f("bytes", (u64::from(count) + 1).to_string());
                p.f("src", hex(addr64(g(3), g(4))));
                p.f("dst", hex(addr64(g(5), g(6))));
            }
            sd::SDMA_OP_WRITE => {
                p.f("dst", hex(addr64(g(1), g(2))));
                p.f(
                    "data",
                    w[4..len]
                        .iter()
                        .map(|v| hex(*v))
                        .collect::<Vec<_>>()
                        .join(" "),
                );
            }
            sd::SDMA_OP_CONST_FILL => {
                p.f("dst", hex(addr64(g(1), g(2))));
                p.f("pattern", hex(g(3)));
                p.f("bytes", (u64::from(bits(g(4), 0, 30)) + 1).to_string());
            }
            sd::SDMA_OP_FENCE => {
                p.f("addr", hex(addr64(g(1), g(2))));
                p.f("data", hex(g(3)));
            }
            sd::SDMA_OP_TRAP => p.f("int_context", hex(g(1))),
            sd::SDMA_OP_POLL_REGMEM => {
                let mem = bits(h, 31, 1) == 1;
                p.f("function", WAIT_FUNCTIONS[bits(h, 28, 3) as usize]);
                p.f("space", if mem { "memory" } else { "register" });
                p.f("addr", hex(addr64(g(1), g(2))));
                p.f("reference", hex(g(3)));
                p.f("mask", hex(g(4)));
                p.f("interval", bits(g(5), 0, 16).to_string());
                p.f("retries", bits(g(5), 16, 12).to_string());
            }
            sd::SDMA_OP_TIMESTAMP => {
                p.f("sub_op", sub.to_string());
                p.f("addr", hex(addr64(g(1), g(2))));
            }
            sd::SDMA_OP_INDIRECT => {
                let ib = addr64(g(1), g(2));
                let n = bits(g(3), 0, 20);
                p.f("vmid", bits(h, 16, 4).to_string());
                p.f("addr", hex(ib));
                p.f("dwords", n.to_string());
                follow(env, ib, n, depth, &mut p, |env, va, w, d| {
                    sdma(env, va, w, d)
                });
            }
            _ => {
                for (k, v) in w[1..len].iter().enumerate() {
                    p.f(&format!("dw{}", k + 1), hex(*v));
                }
            }
        }
        out.push(p);
        i += len;
    }
    out
}

/// Print packets as indented lines.
pub fn print(packets: &[Packet], indent: usize) {
    for p in packets {
        let fields: Vec<String> = p.fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "{:indent$}@{:<16} {:<16} {}",
            "",
            p.va,
            p.name,
            fields.join(" "),
            indent = indent
        );
        if let Some(e) = &p.error {
            println!("{:indent$}  ! {e}", "", indent = indent);
        }
        print(&p.ib, indent + 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use am_runtime::encode::{self, DataSel, Pm4, Sdma};

    fn env<'a>(
        read: &'a dyn Fn(u64, usize) -> anyhow::Result<Vec<u32>>,
        names: &'a HashMap<u64, &'static str>,
        gfx9: bool,
    ) -> Env<'a> {
        Env {
            read,
            reg_names: names,
            gfx9,
            sdma_v5: !gfx9,
        }
    }

    #[test]
    fn pm4_from_the_runtime_encoder_decodes_with_register_names_and_its_ib() {
        let mut ib = Pm4::new(false);
        ib.set_sh(0x20c, &[0x1234, 0x56]);
        ib.dispatch([4, 2, 1], true);
        let ib_words = ib.words.clone();
        let mut m = Pm4::new(false);
        m.wait_ge(0x2000_0000_1000, 7);
        m.indirect(0x2000_0000_8000, ib_words.len());
        m.release_mem(0x2000_0000_2000, 9, DataSel::Data64, true, 0);
        let read = move |va: u64, n: usize| -> anyhow::Result<Vec<u32>> {
            anyhow::ensure!(va == 0x2000_0000_8000, "unexpected IB address {va:#x}");
            Ok(ib_words[..n].to_vec())
        };
        let names = HashMap::from([
            (0x2c00 + 0x20c, "COMPUTE_PGM_LO"),
            (0x2c00 + 0x20d, "COMPUTE_PGM_HI"),
        ]);
        let p = pm4(&env(&read, &names, false), 0x1000, &m.words, 0);
        let got: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(got, ["WAIT_REG_MEM", "INDIRECT_BUFFER", "RELEASE_MEM"]);
        assert_eq!(p[0].fields[0], ("function".into(), ">=".into()));
        assert_eq!(p[0].fields[3], ("addr".into(), "0x200000001000".into()));
        assert_eq!(p[0].fields[4], ("reference".into(), "0x7".into()));
        let ib: Vec<&str> = p[1].ib.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(ib, ["SET_SH_REG", "DISPATCH_DIRECT"]);
        assert_eq!(
            p[1].ib[0].fields[0],
            ("COMPUTE_PGM_LO".into(), "0x1234".into())
        );
        assert_eq!(p[1].ib[1].fields[0], ("groups".into(), "4 x 2 x 1".into()));
        assert_eq!(p[2].fields[2], ("data_sel".into(), "data64".into()));
        assert_eq!(p[2].va, format!("{:#x}", 0x1000 + 4 * (7 + 4)));
    }

    #[test]
    fn a_truncated_pm4_packet_says_how_much_is_missing() {
        let read = |_: u64, _: usize| -> anyhow::Result<Vec<u32>> { anyhow::bail!("none") };
        let names = HashMap::new();
        let mut m = Pm4::new(false);
        m.wait_ge(0x1000, 1);
        let p = pm4(&env(&read, &names, false), 0, &m.words[..4], 0);
        assert_eq!(p.len(), 1);
        let e = p[0].error.as_deref().unwrap_or_default();
        assert!(e.contains("needs 6 body dwords, 3 remain"), "{e}");
    }

    #[test]
    fn aql_dispatch_and_vendor_ib_decode() {
        let read = |_: u64, n: usize| -> anyhow::Result<Vec<u32>> {
            let mut m = Pm4::new(true);
            m.cs_partial_flush();
            Ok(m.words[..n.min(2)].to_vec())
        };
        let names = HashMap::new();
        let d = encode::aql_dispatch([64, 1, 1], [256, 1, 1], 0, 0, 0xa000, 0xb000, 0xc000);
        let v = encode::aql_pm4_ib(0x9000, 2);
        let words: Vec<u32> = d.iter().chain(v.iter()).copied().collect();
        let p = aql(&env(&read, &names, true), 0x4000, &words);
        assert_eq!(p[0].name, "KERNEL_DISPATCH");
        assert!(p[0].fields.contains(&("grid".into(), "256 x 1 x 1".into())));
        assert!(p[0].fields.contains(&("kernarg".into(), "0xb000".into())));
        assert_eq!(p[1].name, "VENDOR_SPECIFIC");
        assert_eq!(p[1].va, "0x4040");
        assert_eq!(p[1].ib[0].name, "INDIRECT_BUFFER");
        assert_eq!(p[1].ib[0].ib[0].name, "EVENT_WRITE");
    }

    #[test]
    fn sdma_from_the_runtime_encoder_decodes() {
        let read = |_: u64, _: usize| -> anyhow::Result<Vec<u32>> { anyhow::bail!("none") };
        let names = HashMap::new();
        for v6 in [true, false] {
            let mut s = Sdma::new(v6);
            s.copy(0x1000, 0x2000, 4096);
            s.fill(0x3000, 0xdead, 64);
            s.write64(0x4000, 0x1_0000_0002);
            s.wait_ge(0x5000, 3);
            s.timestamp(0x6000);
            s.fence(0x7000, 5);
            let p = sdma(&env(&read, &names, !v6), 0, &s.words, 0);
            let got: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(
                got,
                [
                    "COPY_LINEAR",
                    "CONST_FILL",
                    "WRITE",
                    "POLL_REGMEM",
                    "TIMESTAMP",
                    "FENCE"
                ],
                "v6 {v6}"
            );
            assert!(p[0].fields.contains(&("bytes".into(), "4096".into())));
            assert!(p[2].fields.contains(&("data".into(), "0x2 0x1".into())));
            assert!(p[3].fields.contains(&("function".into(), ">=".into())));
        }
    }
}
