//! Malformed discovery tables never panic: random bytes, random mutations and truncations of
//! valid tables either parse or give an error.

use crate::common;

use am_driver::discovery::DiscoveryTable;
use common::*;
use proptest::prelude::*;

fn check(bytes: &[u8]) {
    if let Ok(t) = DiscoveryTable::parse("fuzz", bytes) {
        // Whatever parses must be self-consistent.
        assert!(t.num_dies <= 16);
        for ip in &t.ips {
            assert!(ip.die < t.num_dies);
        }
        assert!(t.harvest.len() <= 32);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..12 << 10)) {
        check(&bytes);
    }

    #[test]
    fn mutated_tables_never_panic(
        mi300 in any::<bool>(),
        edits in proptest::collection::vec((0usize..(10 << 10), any::<u8>()), 1..32),
        cut in 0usize..=(10 << 10),
    ) {
        let mut t = if mi300 { mi300x_like(&[(GC_HWID, 3)]) } else { navi31_like() };
        for (at, v) in edits {
            // Aim most edits at the headers, where counts and offsets live.
            let at = if v & 1 == 0 { at % 0x400 } else { at };
            t[at] = v;
        }
        check(&t);
        check(&t[..cut]);
    }
}
