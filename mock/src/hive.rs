//! XGMI hives: several devices sharing one memory fabric.
//!
//! Firmware programs every hub of a hive member with the hive's layout: `MC_VM_XGMI_LFB_CNTL`
//! (`PF_LFB_REGION` = the member's region id, `PF_MAX_REGION` = members − 1) and
//! `MC_VM_XGMI_LFB_SIZE` (`PF_LFB_SIZE` = the segment size in 16 MiB units). A member's VRAM
//! is segment `region` of the hive's frame-buffer aperture: its `paddr_base` is
//! `region × segment size`, and `MC_VM_FB_LOCATION_BASE/TOP` span all the segments.
//!
//! A [`Hive`] is that shared layout; each member is its own [`crate::MockGpu`] holding an
//! `Arc<Hive>` and its region id, and answers the LFB registers from it (after power-on and
//! after every reset, since firmware programs them). Members share no other state: a reset
//! of one member resets that member only (see `docs/MOCK.md`, "Hives").
//!
//! Specs: profile `PROFILE-hiveN` (e.g. `mi300x-hive4`) makes hives of N members of
//! `PROFILE`. Device index `i` of that profile is region `i % N` of hive `i / N`, so
//! `mock:mi300x-hive4:0..3` is one hive and `mock:mi300x-hive4:200..203` another.
//!
//! The XGMI fabric: a hive also knows its members' devices ([`Hive::member`]), by weak
//! reference: a member joins when it is made and is gone from the fabric when its last handle
//! goes. An engine of one member that reaches an address in another member's segment (through
//! the frame-buffer aperture or a VRAM page entry) reads and writes that member's VRAM; a
//! segment whose member does not exist, or is gone, faults (see `engine::mem`).

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use am_isa::sync::lock;

use crate::device::Shared;

/// Most members a hive may have: `PF_MAX_REGION` and `PF_LFB_REGION` are 4-bit fields on
/// MMHUB 1.8 / GC 9.4.3, and MI300X platforms connect at most 8 GPUs by XGMI.
pub const MAX_MEMBERS: u8 = 8;

/// State shared by the members of one XGMI hive: the layout firmware programs, and the
/// fabric that joins the members' memories.
pub struct Hive {
    /// The members' profile (`mi300x`).
    pub profile: &'static str,
    /// Which hive of that profile and size (device index / members).
    pub id: u32,
    /// Number of devices (regions) in the hive.
    pub num_devices: u8,
    /// Size of each member's segment of the hive's frame-buffer aperture, in bytes (a
    /// multiple of 16 MiB).
    pub segment_size: u64,
    /// The members' devices by region: weak, so the fabric keeps no member alive.
    fabric: Mutex<Vec<Weak<Shared>>>,
}

impl std::fmt::Debug for Hive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hive")
            .field("profile", &self.profile)
            .field("id", &self.id)
            .field("num_devices", &self.num_devices)
            .field("segment_size", &self.segment_size)
            .field("live_regions", &self.live_regions())
            .finish()
    }
}

impl Hive {
    /// Hive `id` of `members` devices of `profile`. The segment size is the profile's VRAM
    /// rounded up to 16 MiB (chosen: no public register dump of an MI300X hive was found; a
    /// member's VRAM then fills its segment, so segments neither overlap nor leave holes).
    pub fn new(profile: &str, members: u8, id: u32) -> crate::Result<Hive> {
        let p = crate::Profile::by_name(profile)?;
        if !(2..=MAX_MEMBERS).contains(&members) {
            return Err(crate::Error::BadHive {
                name: spec_profile(profile, members),
                reason: format!("a hive has 2 to {MAX_MEMBERS} members"),
            });
        }
        Ok(Hive {
            profile: p.name,
            id,
            num_devices: members,
            segment_size: p.vram_size.next_multiple_of(1 << 24),
            fabric: Mutex::new((0..members).map(|_| Weak::new()).collect()),
        })
    }

    fn fabric(&self) -> MutexGuard<'_, Vec<Weak<Shared>>> {
        lock(&self.fabric)
    }

    /// A new member takes its place on the fabric. Refused when the region does not exist
    /// or a live device already holds it.
    pub(crate) fn join(&self, region: u8, dev: &Arc<Shared>) -> crate::Result<()> {
        let bad = |reason: String| crate::Error::BadHive {
            name: self.spec_profile(),
            reason,
        };
        let mut fabric = self.fabric();
        let slot = fabric.get_mut(usize::from(region)).ok_or_else(|| {
            bad(format!(
                "region {region} is beyond the hive's {} members",
                self.num_devices
            ))
        })?;
        if let Some(other) = slot.upgrade() {
            return Err(bad(format!(
                "region {region} is already held by {}",
                other.name()
            )));
        }
        *slot = Arc::downgrade(dev);
        Ok(())
    }

    /// The device holding `region`, if it exists and has not gone.
    pub(crate) fn member(&self, region: u8) -> Option<Arc<Shared>> {
        self.fabric().get(usize::from(region))?.upgrade()
    }

    /// The regions whose devices exist now, ascending.
    pub fn live_regions(&self) -> Vec<u8> {
        self.fabric()
            .iter()
            .enumerate()
            .filter(|(_, w)| w.strong_count() > 0)
            .map(|(r, _)| r as u8)
            .collect()
    }

    /// The profile name its members are opened with (`mi300x-hive4`).
    pub fn spec_profile(&self) -> String {
        spec_profile(self.profile, self.num_devices)
    }

    /// The device index of the member with region id `region`.
    pub fn device_index(&self, region: u8) -> u32 {
        self.id * u32::from(self.num_devices) + u32::from(region)
    }

    /// `PF_MAX_REGION`: the highest region id.
    pub fn max_region(&self) -> u32 {
        u32::from(self.num_devices) - 1
    }

    /// `PF_LFB_SIZE`: the segment size in 16 MiB units.
    pub fn lfb_size(&self) -> u32 {
        (self.segment_size >> 24) as u32
    }

    /// Bytes of the hive's frame-buffer aperture (all segments).
    pub fn aperture_size(&self) -> u64 {
        self.segment_size * u64::from(self.num_devices)
    }
}

/// The profile name of hives of `members` devices of `profile` (`mi300x-hive4`).
pub fn spec_profile(profile: &str, members: u8) -> String {
    format!("{profile}-hive{members}")
}

/// Split a hive profile name (`mi300x-hive4`) into the member profile and the member count.
/// `None` when the name carries no `-hiveN` suffix.
pub fn parse_profile(name: &str) -> Option<(&str, &str)> {
    let (base, n) = name.rsplit_once("-hive")?;
    (!base.is_empty()).then_some((base, n))
}

/// A device's place in a hive: the shared layout and its own region id.
#[derive(Debug, Clone)]
pub struct Member {
    /// The hive.
    pub hive: Arc<Hive>,
    /// `PF_LFB_REGION`: this member's segment.
    pub region: u8,
}

impl PartialEq for Member {
    /// The same region of the same hive.
    fn eq(&self, other: &Member) -> bool {
        Arc::ptr_eq(&self.hive, &other.hive) && self.region == other.region
    }
}

impl Eq for Member {}

impl Member {
    /// This member's `paddr_base`: where its VRAM starts in the hive's aperture.
    pub fn paddr_base(&self) -> u64 {
        u64::from(self.region) * self.hive.segment_size
    }
}
