//! Packet decoders for `am ring`: PM4 type-3 (GFX9 and GFX10+ compute), AQL (64-byte HSA
//! packets, AMD's PM4-IB vendor packet), and SDMA (4.4 and 5+). Each takes the dwords of a
//! stream and a reader of GPU virtual memory, and follows indirect buffers.
//!
//! Opcodes, names and field positions are `am_autogen`'s (`pm4`, `sdma_pkt` and the layouts
//! of `am_autogen::packets`, from Linux's `nvd.h`/`soc15d.h`,
//! `sdma_v6_0_0_pkt_open.h`/`vega10_sdma_pkt_open.h` and `hsa.h`), shared with the runtime's
//! encoders and the mock's engines; the tests decode what the runtime's encoders write.

use std::collections::HashMap;

use am_autogen::packets::{aql as aq, pm4 as p4, qword as addr64, sdma as sp};
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

/// Decode a PM4 stream of `words` that starts at `va`.
pub fn pm4(env: &Env<'_>, va: u64, words: &[u32], depth: usize) -> Vec<Packet> {
    let mut out = vec![];
    let mut i = 0usize;
    while i < words.len() {
        let at = va + i as u64 * 4;
        let h = words[i];
        let kind = p4::TYPE.get(h);
        if kind == op::PACKET_TYPE2 {
            // A type-2 packet is one dword of padding.
            out.push(Packet::new(at, "TYPE2_NOP", 1));
            i += 1;
            continue;
        }
        if kind != op::PACKET_TYPE3 {
            let mut p = Packet::new(at, format!("type-{kind} packet"), 1);
            p.error = Some(format!(
                "header {h:#010x}: compute queues take type-3 packets; decoding stops here"
            ));
            out.push(p);
            break;
        }
        let body_len = p4::COUNT.get(h) as usize + 1;
        let opcode = p4::OPCODE.get(h);
        let name = p4::name(opcode).map_or(format!("PM4 opcode {opcode:#04x}"), str::to_string);
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
            let first = u64::from(base) + u64::from(p4::set_reg::REG_OFFSET.at(b));
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
            use p4::wait_reg_mem as w;
            let mem = w::MEM_SPACE.at(b) == w::SPACE_MEMORY;
            let write = w::OPERATION.at(b) == w::OP_WRITE_WAIT;
            p.f("function", w::FUNCTIONS[w::FUNCTION.at(b) as usize]);
            p.f("space", if mem { "memory" } else { "register" });
            p.f("operation", if write { "write, wait" } else { "wait" });
            if mem {
                p.f("addr", hex(addr64(g(w::ADDR_LO) & !3, g(w::ADDR_HI))));
            } else {
                let name = |a: u32| {
                    env.reg_names
                        .get(&u64::from(a))
                        .map_or(hex(a), |n| n.to_string())
                };
                p.f("register", name(g(w::ADDR_LO)));
                if write {
                    p.f("register2", name(g(w::ADDR_HI)));
                }
            }
            p.f("reference", hex(g(w::REFERENCE)));
            p.f("mask", hex(g(w::MASK)));
            p.f("poll_interval", g(w::POLL_INTERVAL).to_string());
        }
        op::PACKET3_RELEASE_MEM => {
            use p4::release_mem as r;
            p.f("event", hex(r::EVENT_TYPE.at(b)));
            p.f("event_index", r::EVENT_INDEX.at(b).to_string());
            p.f(
                "data_sel",
                r::DATA_SELS
                    .get(r::DATA_SEL.at(b) as usize)
                    .copied()
                    .unwrap_or("reserved"),
            );
            p.f("int_sel", r::INT_SEL.at(b).to_string());
            p.f("addr", hex(addr64(g(r::ADDR_LO), g(r::ADDR_HI))));
            p.f("data", hex(addr64(g(r::DATA_LO), g(r::DATA_HI))));
        }
        op::PACKET3_ACQUIRE_MEM => {
            use p4::acquire_mem as a;
            if env.gfx9 {
                p.f("coher_cntl", hex(g(a::COHER_CNTL)));
            }
            p.f("size", hex(addr64(g(a::SIZE_LO), g(a::SIZE_HI))));
            p.f("base", hex(addr64(g(a::BASE_LO), g(a::BASE_HI)) << 8));
            if !env.gfx9 {
                p.f("gcr_cntl", hex(g(a::GCR_CNTL)));
            }
            p.f("poll_interval", g(a::POLL_INTERVAL).to_string());
        }
        op::PACKET3_DISPATCH_DIRECT => {
            use p4::dispatch_direct as d;
            p.f(
                "groups",
                format!(
                    "{} x {} x {}",
                    g(d::DIM_X),
                    g(d::DIM_X + 1),
                    g(d::DIM_X + 2)
                ),
            );
            p.f("initiator", hex(g(d::INITIATOR)));
        }
        op::PACKET3_EVENT_WRITE => {
            use p4::event_write as e;
            p.f("event", hex(e::EVENT_TYPE.at(b)));
            p.f("event_index", e::EVENT_INDEX.at(b).to_string());
        }
        op::PACKET3_WRITE_DATA => {
            use p4::write_data as w;
            p.f("dst_sel", w::DST_SEL.at(b).to_string());
            p.f("addr", hex(addr64(g(w::ADDR_LO), g(w::ADDR_HI))));
            p.f(
                "data",
                b.iter()
                    .skip(w::DATA)
                    .map(|v| hex(*v))
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        op::PACKET3_COPY_DATA => {
            use p4::copy_data as c;
            p.f("src_sel", c::SRC_SEL.at(b).to_string());
            p.f("dst_sel", c::DST_SEL.at(b).to_string());
            p.f("src", hex(addr64(g(c::SRC_LO), g(c::SRC_HI))));
            p.f("dst", hex(addr64(g(c::DST_LO), g(c::DST_HI))));
        }
        op::PACKET3_INDIRECT_BUFFER => {
            use p4::indirect_buffer as i;
            let ib = addr64(g(i::BASE_LO) & !3, i::BASE_HI.at(b));
            let n = i::IB_SIZE.at(b);
            p.f("addr", hex(ib));
            p.f("dwords", n.to_string());
            p.f("valid", i::VALID.is_set(g(i::VALID.dw)).to_string());
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

/// Decode 64-byte AQL packets (16 dwords each) starting at `va`.
pub fn aql(env: &Env<'_>, va: u64, words: &[u32]) -> Vec<Packet> {
    words
        .chunks(aq::DWORDS)
        .enumerate()
        .map(|(k, w)| aql_one(env, va + k as u64 * 64, w))
        .collect()
}

fn aql_one(env: &Env<'_>, at: u64, w: &[u32]) -> Packet {
    let g = |k: usize| w.get(k).copied().unwrap_or(0);
    let kind = aq::TYPE.at(w);
    let name = aq::TYPE_NAMES
        .get(kind as usize)
        .map_or(format!("AQL type {kind}"), |n| n.to_string());
    let mut p = Packet::new(at, name, aq::DWORDS);
    if w.len() < aq::DWORDS {
        p.error = Some("a partial packet".into());
        return p;
    }
    p.f("barrier", aq::BARRIER.at(w).to_string());
    p.f(
        "acquire",
        aq::SCOPE_NAMES[aq::ACQUIRE_FENCE_SCOPE.at(w) as usize],
    );
    p.f(
        "release",
        aq::SCOPE_NAMES[aq::RELEASE_FENCE_SCOPE.at(w) as usize],
    );
    let signal = hex(addr64(
        g(aq::COMPLETION_SIGNAL),
        g(aq::COMPLETION_SIGNAL + 1),
    ));
    match kind {
        aq::KERNEL_DISPATCH => {
            use aq::dispatch as d;
            p.f("dimensions", d::DIMENSIONS.at(w).to_string());
            p.f(
                "workgroup",
                format!(
                    "{} x {} x {}",
                    d::WORKGROUP_X.at(w),
                    d::WORKGROUP_Y.at(w),
                    d::WORKGROUP_Z.at(w)
                ),
            );
            p.f(
                "grid",
                format!(
                    "{} x {} x {}",
                    g(d::GRID_X),
                    g(d::GRID_X + 1),
                    g(d::GRID_X + 2)
                ),
            );
            p.f("private_segment", g(d::PRIVATE_SEGMENT_SIZE).to_string());
            p.f("group_segment", g(d::GROUP_SEGMENT_SIZE).to_string());
            p.f(
                "kernel_object",
                hex(addr64(g(d::KERNEL_OBJECT), g(d::KERNEL_OBJECT + 1))),
            );
            p.f("kernarg", hex(addr64(g(d::KERNARG), g(d::KERNARG + 1))));
            p.f("completion_signal", signal);
        }
        aq::BARRIER_AND | aq::BARRIER_OR => {
            use aq::barrier as br;
            for k in 0..br::DEP_SIGNALS {
                let s = addr64(g(br::DEP_SIGNAL + 2 * k), g(br::DEP_SIGNAL + 2 * k + 1));
                if s != 0 {
                    p.f(&format!("dep_signal{k}"), hex(s));
                }
            }
            p.f("completion_signal", signal);
        }
        aq::VENDOR_SPECIFIC => {
            // AMD vendor packet (`AMD_AQL_FORMAT_PM4_IB` = 1): a PM4 INDIRECT_BUFFER in
            // dwords 1..4, then the dwords remaining.
            use aq::vendor as v;
            let format = v::AMD_FORMAT.at(w);
            p.f("amd_format", format.to_string());
            if format == v::FORMAT_PM4_IB {
                let cmd = v::PM4..v::PM4 + 1 + p4::indirect_buffer::BODY;
                p.ib = pm4(env, at + 4 * v::PM4 as u64, &w[cmd], 0);
                p.f("dw_cnt_remain", g(v::DW_CNT_REMAIN).to_string());
                p.f("completion_signal", signal);
            }
        }
        _ => {}
    }
    p
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
        let (opcode, sub) = (sp::OP.get(h), sp::SUB_OP.get(h));
        let len = sp::packet_dwords(w, env.sdma_v5).unwrap_or(0) as usize;
        let name = sp::name(opcode, env.sdma_v5)
            .map_or(format!("SDMA opcode {opcode:#x}"), str::to_string);
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
                use sp::copy_linear as c;
                p.name = if sub == sd::SDMA_SUBOP_COPY_LINEAR {
                    "COPY_LINEAR".into()
                } else {
                    format!("COPY sub-op {sub}")
                };
                let count = c::count(env.sdma_v5).at(w);
                p.f("bytes", (u64::from(count) + 1).to_string());
                p.f("src", hex(addr64(g(c::SRC_LO), g(c::SRC_LO + 1))));
                p.f("dst", hex(addr64(g(c::DST_LO), g(c::DST_LO + 1))));
            }
            sd::SDMA_OP_WRITE => {
                use sp::write_untiled as wu;
                p.f("dst", hex(addr64(g(wu::DST_LO), g(wu::DST_LO + 1))));
                p.f(
                    "data",
                    w[wu::DATA..len]
                        .iter()
                        .map(|v| hex(*v))
                        .collect::<Vec<_>>()
                        .join(" "),
                );
            }
            sd::SDMA_OP_CONST_FILL => {
                use sp::constant_fill as f;
                p.f("dst", hex(addr64(g(f::DST_LO), g(f::DST_LO + 1))));
                p.f("pattern", hex(g(f::DATA)));
                p.f(
                    "bytes",
                    (u64::from(f::count(env.sdma_v5).at(w)) + 1).to_string(),
                );
            }
            sd::SDMA_OP_FENCE => {
                use sp::fence as f;
                p.f("addr", hex(addr64(g(f::ADDR_LO), g(f::ADDR_LO + 1))));
                p.f("data", hex(g(f::DATA)));
            }
            sd::SDMA_OP_TRAP => p.f("int_context", hex(g(sp::trap::INT_CONTEXT.dw))),
            sd::SDMA_OP_POLL_REGMEM => {
                use sp::poll_regmem as r;
                let mem = r::MEM_POLL.is_set(h);
                p.f(
                    "function",
                    p4::wait_reg_mem::FUNCTIONS[r::FUNC.get(h) as usize],
                );
                p.f("space", if mem { "memory" } else { "register" });
                p.f("addr", hex(addr64(g(r::ADDR_LO), g(r::ADDR_HI))));
                p.f("reference", hex(g(r::VALUE)));
                p.f("mask", hex(g(r::MASK)));
                p.f("interval", r::INTERVAL.at(w).to_string());
                p.f("retries", r::RETRY_COUNT.at(w).to_string());
            }
            sd::SDMA_OP_TIMESTAMP => {
                use sp::timestamp as t;
                p.f("sub_op", sub.to_string());
                p.f("addr", hex(addr64(g(t::ADDR_LO), g(t::ADDR_LO + 1))));
            }
            sd::SDMA_OP_INDIRECT => {
                use sp::indirect as ind;
                let ib = addr64(g(ind::BASE_LO), g(ind::BASE_LO + 1));
                let n = ind::IB_SIZE.at(w);
                p.f("vmid", ind::VMID.get(h).to_string());
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
