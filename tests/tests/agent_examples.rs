//! The agent examples' suite (`examples/agents`): an OpenAI Agents SDK agent, a LangGraph
//! graph, a Claude Agent SDK permission callback and a Managed Agents custom-tool round trip,
//! each getting its tool approvals from `airlock gateway`, run with the repository's virtual
//! environment against the test broker and this build's `airlock` (the suite starts its own
//! worker and gateway). Every model and session API is a stand-in on 127.0.0.1.
//!
//! `.ci/run` installs `examples/agents/requirements.txt` into `.venv`. Without it the test
//! skips with the reason, except under `CI`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use airlock_testkit::amqp_url;
use airlock_tests::airlock_bin;

#[test]
fn agent_examples_suite() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository root").to_path_buf();
    let Some(python) = python(&repo) else { return };
    let output = Command::new(&python)
        .args(["-m", "pytest", "examples/agents", "-q", "-p", "no:cacheprovider"])
        .current_dir(&repo)
        .env("AIRLOCK_AMQP_URL", amqp_url())
        .env("AIRLOCK_BIN", airlock_bin())
        .output()
        .expect("pytest runs");
    println!("{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the agent examples' suite failed ({})", output.status);
}

/// The virtual environment's Python, if it has the examples' packages and pytest; otherwise
/// the test skips (or fails under `CI`).
fn python(repo: &Path) -> Option<PathBuf> {
    let python = repo.join(".venv/bin/python");
    let ready = python.is_file()
        && Command::new(&python)
            .args(["-c", "import agents, langgraph, claude_agent_sdk, standardwebhooks, httpx, pytest"])
            .status()
            .is_ok_and(|status| status.success());
    if ready {
        return Some(python);
    }
    let reason = format!(
        "no {} with the agent examples' requirements (python3 -m venv .venv && .venv/bin/pip install -r examples/agents/requirements.txt)",
        python.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and there is {reason}");
    }
    eprintln!("skipping: {reason}");
    None
}
