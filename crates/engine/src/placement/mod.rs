//! Where threads run, in one place: CPU lists as `taskset` writes them and
//! the CPUs this machine has ([`list`]), the calling thread's CPUs, nice
//! value and scheduling policy ([`this_thread`]), CPU sets a thread moves
//! between ([`CpuSet`]), which CPUs were idle lately ([`idle`]) and which
//! the keystream workers keep busy ([`busy`]). The engine's workers and
//! decrypt-ahead threads, the FUSE ring's queue threads (pinned home,
//! roaming, committing at idle priority) and `--engine-cpus` all place
//! threads through this module; no other module makes a scheduler call.

mod busy;
pub mod idle;
mod list;
#[cfg(target_os = "linux")]
mod set;
pub mod this_thread;

pub use busy::{busy_cpus, mark_busy, Busy};
pub use list::{check_cpus_exist, format_cpu_list, parse_cpu_list, possible_cpus, MAX_CPUS};
#[cfg(target_os = "linux")]
pub use set::CpuSet;
