//! `am bench engines`: the mock's packet engines on the in-process mock navi31, booted by the
//! driver.
//!
//! - **SDMA copy**: one `COPY_LINEAR` of 64 MiB (VRAM → VRAM, then system memory → VRAM),
//!   timed from the doorbell write to the CPU seeing the `FENCE` after it, against `memcpy`
//!   of the same size between two host buffers in the same run (best of `--repeat`, after a
//!   warm-up copy so no side pays for first touches).
//! - **CP packets**: a ring of two-dword `NOP`s ended by a `RELEASE_MEM`, timed from the
//!   doorbell to the fence: packets per second.
//! - **Latency**: an empty submission (one `RELEASE_MEM`), from the doorbell write to the CPU
//!   seeing its value, repeated: median and 99th percentile.

use std::sync::Arc;
use std::time::{Duration, Instant};

use am_autogen::pm4::nvd as pm4;
use am_driver::ip::gfx::{ComputeQueueDesc, MEC_RING0_DOORBELL};
use am_driver::ip::sdma::SdmaQueueDesc;
use am_driver::mm::VirtMapping;
use am_driver::{AmDevice, Options, SysMem};
use am_mock::MockGpu;
use anyhow::{Context, bail};
use serde::Serialize;

/// Everything `am bench engines --json` prints.
#[derive(Debug, Serialize)]
pub struct EnginesReport {
    /// `release` or `debug`.
    pub build: String,
    /// Bytes per copy.
    pub copy_bytes: u64,
    /// `memcpy` of the same size, GB/s (best run).
    pub memcpy_gbps: f64,
    /// SDMA `COPY_LINEAR` VRAM → VRAM, GB/s (best run).
    pub sdma_vram_to_vram_gbps: f64,
    /// SDMA `COPY_LINEAR` system memory → VRAM, GB/s (best run).
    pub sdma_sys_to_vram_gbps: f64,
    /// VRAM → VRAM as a share of memcpy.
    pub vram_to_vram_vs_memcpy: f64,
    /// System → VRAM as a share of memcpy.
    pub sys_to_vram_vs_memcpy: f64,
    /// NOP packets per run.
    pub nop_packets: u64,
    /// CP packets per second (best run).
    pub cp_packets_per_sec: f64,
    /// Empty submissions timed.
    pub latency_samples: usize,
    /// Doorbell to fence of an empty submission, median, µs.
    pub latency_us_median: f64,
    /// 99th percentile, µs.
    pub latency_us_p99: f64,
}

/// A buffer mapped into VM context 0.
struct Buf {
    va: u64,
    paddr: Option<u64>,
    sys: Option<Arc<dyn SysMem>>,
    _mapping: VirtMapping,
}

struct Bench {
    /// Buffers the queues were given: they stay mapped until the device goes.
    held: Vec<Buf>,
    dev: AmDevice,
    gpu: MockGpu,
}

impl Bench {
    fn vram(&self, size: u64) -> anyhow::Result<Buf> {
        let m = self.dev.valloc(size, true)?;
        Ok(Buf {
            va: m.va,
            paddr: Some(m.paddrs[0].0),
            sys: None,
            _mapping: m,
        })
    }

    fn sysmem(&self, size: u64) -> anyhow::Result<Buf> {
        let mem = self.dev.ctx().pci.alloc_sysmem(size as usize, false)?;
        let m = self.dev.map_sysmem(&*mem, false)?;
        Ok(Buf {
            va: m.va,
            paddr: None,
            sys: Some(mem),
            _mapping: m,
        })
    }

    fn write(&self, b: &Buf, off: u64, dwords: &[u32]) -> anyhow::Result<()> {
        let bytes: Vec<u8> = dwords.iter().flat_map(|d| d.to_le_bytes()).collect();
        let p = b.paddr.context("a VRAM buffer")?;
        self.dev.ctx().vram.write(p + off, &bytes)?;
        Ok(())
    }

    fn read64(&self, b: &Buf, off: u64) -> anyhow::Result<u64> {
        let mut v = [0u8; 8];
        let p = b.paddr.context("a VRAM buffer")?;
        self.dev.ctx().vram.read(p + off, &mut v)?;
        Ok(u64::from_le_bytes(v))
    }

    fn doorbell(&self, slot: u32, value: u64) -> anyhow::Result<()> {
        self.dev.hdp_flush()?;
        self.dev
            .ctx()
            .doorbells
            .write_bytes(u64::from(slot) * 8, &value.to_le_bytes())?;
        Ok(())
    }

    /// Spin until the qword at `b + off` is `want` (the CPU's view through BAR0).
    fn wait(&self, b: &Buf, off: u64, want: u64) -> anyhow::Result<()> {
        let until = Instant::now() + Duration::from_secs(60);
        while self.read64(b, off)? != want {
            if Instant::now() > until {
                bail!(
                    "the engine never wrote {want} (queues: {:?})",
                    self.gpu.queues()
                );
            }
            // Leave the core to the engine thread when the machine is busy.
            std::thread::yield_now();
        }
        Ok(())
    }
}

fn release_mem(addr: u64, value: u64) -> Vec<u32> {
    vec![
        pm4::PACKET3(pm4::PACKET3_RELEASE_MEM, 6),
        0x14 | 5 << 8,
        2 << 29,
        addr as u32,
        (addr >> 32) as u32,
        value as u32,
        (value >> 32) as u32,
        0,
    ]
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

fn best(runs: usize, mut f: impl FnMut() -> anyhow::Result<Duration>) -> anyhow::Result<Duration> {
    f()?;
    let mut best = Duration::MAX;
    for _ in 0..runs {
        best = best.min(f()?);
    }
    Ok(best)
}

/// Run the benchmark and print it.
pub fn run(mib: u64, nops: u64, samples: usize, repeat: usize, json: bool) -> anyhow::Result<()> {
    let bytes = mib << 20;
    let gpu = MockGpu::new("navi31")?;
    let mut opts = Options::from_env("bench")?;
    opts.force_reset = false;
    opts.power_limit_w = None;
    let dev = AmDevice::open_with(gpu.open(), opts)?;
    let mut b = Bench {
        held: Vec::new(),
        dev,
        gpu,
    };
    let src: Vec<u8> = (0..bytes).map(|i| (i * 31 + 7) as u8).collect();
    let memcpy = time_memcpy(&src, repeat)?;
    let (v2v, s2v) = b.time_sdma_copies(src, repeat)?;
    let (nops, cp, lat) = b.time_cp(nops, samples, repeat)?;
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6;
    if !b.gpu.violations().is_empty() {
        bail!("the mock recorded violations: {:?}", b.gpu.violations());
    }

    let report = EnginesReport {
        build: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
        .into(),
        copy_bytes: bytes,
        memcpy_gbps: gbps(bytes, memcpy),
        sdma_vram_to_vram_gbps: gbps(bytes, v2v),
        sdma_sys_to_vram_gbps: gbps(bytes, s2v),
        vram_to_vram_vs_memcpy: memcpy.as_secs_f64() / v2v.as_secs_f64(),
        sys_to_vram_vs_memcpy: memcpy.as_secs_f64() / s2v.as_secs_f64(),
        nop_packets: nops + 1,
        cp_packets_per_sec: (nops + 1) as f64 / cp.as_secs_f64(),
        latency_samples: lat.len(),
        latency_us_median: pct(0.5),
        latency_us_p99: pct(0.99),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print_report(&report, mib, repeat, cp);
    Ok(())
}

/// memcpy between two host buffers, pre-faulted.
fn time_memcpy(src: &[u8], repeat: usize) -> anyhow::Result<Duration> {
    let mut dst = vec![1u8; src.len()];
    best(repeat, || {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(src));
        std::hint::black_box(&dst);
        Ok(t.elapsed())
    })
}

fn print_report(report: &EnginesReport, mib: u64, repeat: usize, cp: Duration) {
    println!(
        "SDMA COPY_LINEAR of {mib} MiB on mock navi31 ({} build), best of {repeat}:",
        report.build
    );
    println!("  memcpy (host to host)  {:7.2} GB/s", report.memcpy_gbps);
    println!(
        "  VRAM → VRAM            {:7.2} GB/s  ({:.0}% of memcpy)",
        report.sdma_vram_to_vram_gbps,
        100.0 * report.vram_to_vram_vs_memcpy
    );
    println!(
        "  system → VRAM          {:7.2} GB/s  ({:.0}% of memcpy)",
        report.sdma_sys_to_vram_gbps,
        100.0 * report.sys_to_vram_vs_memcpy
    );
    println!(
        "CP: {} packets (NOP, then RELEASE_MEM) in {:.2} ms: {:.1} M packets/s",
        report.nop_packets,
        cp.as_secs_f64() * 1e3,
        report.cp_packets_per_sec / 1e6
    );
    println!(
        "Empty submission, doorbell to fence, {} samples: median {:.1} µs, p99 {:.1} µs",
        report.latency_samples, report.latency_us_median, report.latency_us_p99
    );
}

impl Bench {
    /// SDMA `COPY_LINEAR` of `src`: VRAM → VRAM, then system memory → VRAM.
    fn time_sdma_copies(
        &mut self,
        src: Vec<u8>,
        repeat: usize,
    ) -> anyhow::Result<(Duration, Duration)> {
        let bytes = src.len() as u64;
        let ring_size = 0x10_0000u64;
        let ring = self.vram(ring_size)?;
        let gart = self.vram(0x1000)?;
        let a = self.vram(bytes)?;
        let c = self.vram(bytes)?;
        let sys = self.sysmem(bytes)?;
        // Real data on both sources: memory nobody wrote would copy as a cheap fill.
        self.dev.ctx().vram.write(a.paddr.context("VRAM")?, &src)?;
        self.dev.hdp_flush()?;
        sys.sys
            .as_ref()
            .context("system memory")?
            .write_bytes(0, &src)?;
        drop(src);
        let sdma = self.dev.create_sdma_queue(&SdmaQueueDesc {
            engine: 0,
            ring: ring.va,
            ring_size,
            rptr_addr: gart.va,
            wptr_addr: gart.va + 8,
        })?;
        let mut put = 0u64;
        let mut fence = 0u64;
        let mut copy = |b: &mut Bench, src: u64| -> anyhow::Result<Duration> {
            fence += 1;
            let mut p = vec![1, (bytes - 1) as u32, 0, src as u32, (src >> 32) as u32];
            p.extend([c.va as u32, (c.va >> 32) as u32]);
            p.extend([
                5,
                (gart.va + 0x100) as u32,
                ((gart.va + 0x100) >> 32) as u32,
                fence as u32,
            ]);
            p.push(0);
            if (put % ring_size) + 4 * p.len() as u64 > ring_size {
                put = put.next_multiple_of(ring_size);
            }
            b.write(&ring, put % ring_size, &p)?;
            put += 4 * p.len() as u64;
            let t = Instant::now();
            b.doorbell(sdma.doorbell, put)?;
            b.wait(&gart, 0x100, fence)?;
            Ok(t.elapsed())
        };
        let v2v = best(repeat, || copy(self, a.va))?;
        let s2v = best(repeat, || copy(self, sys.va))?;
        self.held.extend([ring, gart, a, c, sys]);
        Ok((v2v, s2v))
    }

    /// CP: a ring of NOPs ended by a `RELEASE_MEM` (best of `repeat`), then `samples` empty
    /// submissions, sorted. Returns the NOPs that fit the ring, their time and the samples.
    fn time_cp(
        &mut self,
        nops: u64,
        samples: usize,
        repeat: usize,
    ) -> anyhow::Result<(u64, Duration, Vec<Duration>)> {
        let cp_ring_size = 8 << 20;
        let cp_ring = self.vram(cp_ring_size)?;
        let cp_gart = self.vram(0x1000)?;
        let eop = self.vram(0x1000)?;
        self.dev.create_compute_queue(&ComputeQueueDesc {
            ring: cp_ring.va,
            ring_size: cp_ring_size,
            rptr_addr: cp_gart.va,
            wptr_addr: cp_gart.va + 8,
            eop_addr: eop.va,
            eop_size: 0x1000,
            doorbell: MEC_RING0_DOORBELL,
            aql: false,
            pipe: 0,
            queue: 0,
        })?;
        let max_nops = (cp_ring_size / 4 - 16) / 2;
        let nops = nops.min(max_nops);
        let mut cput = 0u64;
        let mut seq = 0u64;
        let mut submit = |b: &mut Bench, body: &[u32]| -> anyhow::Result<Duration> {
            seq += 1;
            let mut p = body.to_vec();
            p.extend(release_mem(cp_gart.va + 0x100, seq));
            let ring_dw = cp_ring_size / 4;
            if cput % ring_dw + p.len() as u64 > ring_dw {
                // Fill to the end of the ring with one-dword NOPs and start over.
                let fill = ring_dw - cput % ring_dw;
                b.write(
                    &cp_ring,
                    4 * (cput % ring_dw),
                    &vec![0xffff_1000; fill as usize],
                )?;
                cput += fill;
            }
            b.write(&cp_ring, 4 * (cput % ring_dw), &p)?;
            cput += p.len() as u64;
            let t = Instant::now();
            b.doorbell(MEC_RING0_DOORBELL, cput)?;
            b.wait(&cp_gart, 0x100, seq)?;
            Ok(t.elapsed())
        };
        let nop_body: Vec<u32> = (0..nops)
            .flat_map(|_| [pm4::PACKET3(pm4::PACKET3_NOP, 0), 0])
            .collect();
        let cp = best(repeat, || submit(self, &nop_body))?;
        let mut lat: Vec<Duration> = (0..samples)
            .map(|_| submit(self, &[]))
            .collect::<anyhow::Result<_>>()?;
        lat.sort();
        self.held.extend([cp_ring, cp_gart, eop]);
        Ok((nops, cp, lat))
    }
}
