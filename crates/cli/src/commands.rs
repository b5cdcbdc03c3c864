//! One module per subcommand.

pub mod policy;

/// Exit status for bad usage or a bad configuration (sysexits' EX_USAGE, as linkerd uses).
pub const EXIT_CONFIG: u8 = 64;
