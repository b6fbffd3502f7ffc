//! The mock's error type.

/// What can go wrong when building or driving a mock device (as opposed to a contract
/// violation by the driver, which is a [`crate::Violation`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `mock:NAME` names no profile.
    #[error("unknown mock profile {name:?} (known: {known})")]
    UnknownProfile {
        /// What was asked for.
        name: String,
        /// The profiles that exist, comma-separated.
        known: String,
    },
    /// A profile whose register segments overlap or whose discovery table does not fit:
    /// a bug in the profile tables, reported instead of building a device that lies.
    #[error("mock profile {profile}: {reason}")]
    BadProfile {
        /// Profile name.
        profile: &'static str,
        /// What is inconsistent.
        reason: String,
    },
    /// A hive profile (`PROFILE-hiveN`) or member index that cannot be built.
    #[error("mock hive {name:?}: {reason}")]
    BadHive {
        /// The hive profile name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// The mock's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for am_driver::Error {
    fn from(e: Error) -> Self {
        am_driver::Error::from(am_driver::ErrorKind::BadDeviceSpec {
            spec: match &e {
                Error::UnknownProfile { name, .. } => format!("mock:{name}"),
                Error::BadProfile { profile, .. } => format!("mock:{profile}"),
                Error::BadHive { name, .. } => format!("mock:{name}"),
            },
            reason: e.to_string(),
        })
    }
}
