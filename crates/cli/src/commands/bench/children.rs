//! The processes a bench starts: policy workers and the echo responder, each this same
//! program with another subcommand, stopped with SIGTERM (as an operator would) at the end.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::{Child, Command};
use tracing::warn;

use crate::commands::Failure;

/// How long a child may take to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// Log filter of the children unless `RUST_LOG` says otherwise: problems only, so their
/// output does not mix with the report.
const CHILD_LOG: &str = "warn";

/// The variable `--amqp` falls back to.
const AMQP_URL_ENV: &str = "AIRLOCK_AMQP_URL";

/// Running children; dropping this kills them (SIGKILL), stopping them is graceful.
#[derive(Debug, Default)]
pub struct Children {
    running: Vec<Running>,
}

#[derive(Debug)]
struct Running {
    name: String,
    pid: u32,
    child: Child,
}

impl Children {
    /// Starts this program with `args` as the child `name`, the broker URL in its environment
    /// (`AIRLOCK_AMQP_URL`, so its password does not show in the process list).
    pub fn spawn(&mut self, name: impl Into<String>, amqp_url: &str, args: &[&str]) -> Result<(), Failure> {
        let name = name.into();
        let program = std::env::current_exe().map_err(|e| Failure::other(format!("cannot find this program: {e}")))?;
        let mut command = Command::new(program);
        command.args(args).env(AMQP_URL_ENV, amqp_url);
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit()).kill_on_drop(true);
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", CHILD_LOG);
        }
        let child = command.spawn().map_err(|e| Failure::other(format!("cannot start {name}: {e}")))?;
        let pid = child.id().ok_or_else(|| Failure::other(format!("{name} exited at once")))?;
        self.running.push(Running { name, pid, child });
        Ok(())
    }

    /// Fails if a child has exited (they run until stopped).
    pub fn check_alive(&mut self) -> Result<(), Failure> {
        for running in &mut self.running {
            if let Ok(Some(status)) = running.child.try_wait() {
                return Err(Failure::other(format!("{} exited early ({status})", running.name)));
            }
        }
        Ok(())
    }

    /// The process ids of the running children named `names`.
    pub fn pids(&self, names: &[String]) -> Vec<u32> {
        self.running.iter().filter(|running| names.contains(&running.name)).map(|running| running.pid).collect()
    }

    /// The peak resident memory (`VmHWM`) of the running children named `names`, in bytes;
    /// `None` where `/proc` does not tell.
    pub fn peak_rss(&self, names: &[String]) -> Vec<Option<u64>> {
        self.running
            .iter()
            .filter(|running| names.contains(&running.name))
            .map(|running| peak_rss(running.pid))
            .collect()
    }

    /// Stops every child: SIGTERM, then up to [`STOP_GRACE`] for it to exit, then SIGKILL.
    pub async fn stop_all(&mut self) {
        for running in &self.running {
            terminate(running.pid).await;
        }
        for mut running in self.running.drain(..) {
            match tokio::time::timeout(STOP_GRACE, running.child.wait()).await {
                Ok(Ok(status)) => report_exit(&running.name, status),
                Ok(Err(e)) => warn!(child = %running.name, error = %e, "Could not wait for a child."),
                Err(_) => {
                    warn!(child = %running.name, grace = ?STOP_GRACE, "Child did not stop in time; killing it.");
                    let _ = running.child.kill().await;
                }
            }
        }
    }
}

/// Sends SIGTERM through kill(1): the standard library only sends SIGKILL, and this crate
/// has no unsafe code to call kill(2) itself.
async fn terminate(pid: u32) {
    let sent = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    if !matches!(sent, Ok(status) if status.success()) {
        warn!(pid, "Could not send SIGTERM; the child will be killed after the grace period.");
    }
}

fn report_exit(name: &str, status: ExitStatus) {
    if !status.success() {
        warn!(child = %name, %status, "Child exited with a failure.");
    }
}

/// `VmHWM` of `/proc/<pid>/status`, in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_hwm(&status)
}

fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|line| line.strip_prefix("VmHWM:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_peak_resident_size() {
        let status = "Name:\tairlock\nVmPeak:\t  30000 kB\nVmHWM:\t   12345 kB\nVmRSS:\t   12000 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(12345 * 1024));
        assert_eq!(parse_vm_hwm("Name:\tx\n"), None);
        assert!(peak_rss(std::process::id()).is_some_and(|bytes| bytes > 0));
    }
}
