//! CPU pinning and CPU time used.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::sys::resource::{getrusage, UsageWho};
use nix::unistd::Pid;

/// Pin the whole process (its only thread) to `cpu`. Refuses a CPU outside
/// the current affinity mask (offline, not in the cgroup's cpuset, out of
/// range) with a message listing the allowed ones.
pub fn pin(cpu: usize) -> Result<(), String> {
    let allowed = sched_getaffinity(Pid::from_raw(0))
        .map_err(|e| format!("--cpu: cannot read the CPU affinity: {e}"))?;
    let list: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| allowed.is_set(c).unwrap_or(false))
        .collect();
    if !list.contains(&cpu) {
        return Err(format!(
            "--cpu {cpu}: not an allowed CPU for this process (allowed: {})",
            list.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    let mut set = CpuSet::new();
    set.set(cpu).map_err(|e| format!("--cpu {cpu}: {e}"))?;
    sched_setaffinity(Pid::from_raw(0), &set)
        .map_err(|e| format!("--cpu {cpu}: sched_setaffinity failed: {e}"))
}

/// User and system CPU seconds used by this process so far.
pub fn times() -> (f64, f64) {
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
            (s(u.user_time()), s(u.system_time()))
        }
        Err(_) => (0.0, 0.0),
    }
}
