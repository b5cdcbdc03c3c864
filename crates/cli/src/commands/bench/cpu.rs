//! CPU time of processes, from `/proc`: what each side of a round trip costs the runner, the
//! responder and the broker.

use std::future::Future;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use super::traffic::Phase;

/// CPU time spent during some rounds of load.
#[derive(Debug, Clone, Copy)]
pub struct Cpu {
    /// This process: the requesting side.
    pub runner: Duration,
    /// The responding processes (the workers, or an echo's responder); `None` if unreadable.
    pub responder: Option<Duration>,
    /// The broker, when it runs on this machine.
    pub broker: Option<Duration>,
}

impl Default for Cpu {
    /// Nothing spent yet, every part known.
    fn default() -> Self {
        Self { runner: Duration::ZERO, responder: Some(Duration::ZERO), broker: Some(Duration::ZERO) }
    }
}

impl Cpu {
    /// Adds the time of `other`; a part either side could not read stays unknown.
    pub fn add(&mut self, other: Cpu) {
        self.runner += other.runner;
        self.responder = self.responder.zip(other.responder).map(|(a, b)| a + b);
        self.broker = self.broker.zip(other.broker).map(|(a, b)| a + b);
    }
}

/// The processes one side's CPU time is read from.
#[derive(Debug, Clone)]
pub struct Pids {
    /// The responding processes.
    pub responders: Vec<u32>,
    /// The broker, if found.
    pub broker: Option<u32>,
}

impl Pids {
    /// Runs `load` and returns what it measured with the CPU time each part spent meanwhile.
    pub async fn measure(&self, load: impl Future<Output = Phase>) -> (Phase, Cpu) {
        let me = std::process::id();
        let read = || (process_cpu(me), total_cpu(&self.responders), self.broker.and_then(process_cpu));
        let before = read();
        let phase = load.await;
        let after = read();
        let spent = |a: Option<Duration>, b: Option<Duration>| Some(b?.saturating_sub(a?));
        let cpu = Cpu {
            runner: spent(before.0, after.0).unwrap_or_default(),
            responder: spent(before.1, after.1),
            broker: spent(before.2, after.2),
        };
        (phase, cpu)
    }
}

/// User plus system CPU time of process `pid` so far (all its threads, live or gone), or
/// `None` where `/proc` does not tell.
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let ticks = parse_cpu_ticks(&stat)?;
    Some(Duration::from_secs_f64(ticks as f64 / ticks_per_second()))
}

/// `utime + stime` of a `/proc/<pid>/stat` line, in clock ticks. The command name (field 2)
/// is in parentheses and may hold spaces, so fields are counted after its closing one.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let (_, after_name) = stat.rsplit_once(')')?;
    let mut fields = after_name.split_whitespace();
    // After the name: state (3), then fields 4..=13, utime (14) and stime (15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`; 100 on Linux unless changed).
fn ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|output| String::from_utf8(output.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .filter(|ticks: &f64| *ticks > 0.0)
            .unwrap_or(100.0)
    })
}

/// The RabbitMQ node on this machine: the one process named `beam.smp`, if there is exactly
/// one (with several, which is the broker cannot be told).
pub fn broker_pid() -> Option<u32> {
    let mut found = std::fs::read_dir("/proc").ok()?.filter_map(|entry| {
        let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        (name.trim_end() == "beam.smp").then_some(pid)
    });
    let pid = found.next()?;
    found.next().is_none().then_some(pid)
}

/// CPU time spent by a set of processes, summed; `None` for no process (workers the bench did
/// not start) or one that cannot be read.
pub fn total_cpu(pids: &[u32]) -> Option<Duration> {
    if pids.is_empty() {
        return None;
    }
    pids.iter().map(|&pid| process_cpu(pid)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_user_and_system_time_past_a_name_with_spaces() {
        let stat = "4242 (tokio (rt) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_cpu_ticks(stat), Some(300));
        assert_eq!(parse_cpu_ticks("4242 (x) S 1"), None);
    }

    #[test]
    fn reads_this_process() {
        assert!(process_cpu(std::process::id()).is_some());
        assert_eq!(total_cpu(&[std::process::id(), u32::MAX]), None, "no such process");
        assert_eq!(total_cpu(&[]), None, "workers running elsewhere are not measured");
    }
}
