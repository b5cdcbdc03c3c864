//! The Inspect integration's Python suite (`integrations/inspect/tests`), run with the
//! repository's virtual environment against the test broker and this build's `airlock`.
//!
//! `.ci/run` creates `.venv` and installs the package with its test extras. Without them the
//! test skips with the reason, except under `CI`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use airlock_testkit::amqp_url;
use airlock_tests::airlock_bin;

#[test]
fn inspect_integration_suite() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository root").to_path_buf();
    let Some(python) = python(&repo) else { return };
    let output = Command::new(&python)
        .args(["-m", "pytest", "integrations/inspect/tests", "-q", "-p", "no:cacheprovider"])
        .current_dir(&repo)
        .env("AIRLOCK_AMQP_URL", amqp_url())
        .env("AIRLOCK_BIN", airlock_bin())
        .output()
        .expect("pytest runs");
    println!("{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the Inspect integration suite failed ({})", output.status);
}

/// The virtual environment's Python, if it has the package and pytest; otherwise the test
/// skips (or fails under `CI`).
fn python(repo: &Path) -> Option<PathBuf> {
    let python = repo.join(".venv/bin/python");
    let ready = python.is_file()
        && Command::new(&python)
            .args(["-c", "import airlock, inspect_ai, pytest, grpc_tools, openai"])
            .status()
            .is_ok_and(|status| status.success());
    if ready {
        return Some(python);
    }
    let reason = format!(
        "no {} with the Inspect integration installed (python3 -m venv .venv && .venv/bin/pip install -e 'integrations/inspect[test]')",
        python.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and there is {reason}");
    }
    eprintln!("skipping: {reason}");
    None
}
