//! The Inspect integration's Python suite (`integrations/inspect/tests`), run with the
//! repository's virtual environment against the test broker and this build's `airlock`.
//!
//! `.ci/run` creates `.venv` and installs the package with its test extras. Without them the
//! test skips with the reason, except under `CI`, where it fails.

use airlock_tests::{run_pytest, venv_python};

#[test]
fn inspect_integration_suite() {
    let needed = "the Inspect integration installed (python3 -m venv .venv && .venv/bin/pip install -e 'integrations/inspect[test]')";
    let Some(python) = venv_python("airlock, inspect_ai, pytest, grpc_tools, openai", needed) else { return };
    run_pytest(&python, "integrations/inspect/tests");
}
