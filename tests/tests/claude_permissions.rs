//! The `claude_permissions` step against Claude Code itself (`tests/claude_permissions`): the
//! corpus's tool calls and rule sets go to the real Claude Code CLI bundled in the
//! claude-agent-sdk wheel (through the Python SDK, against a stand-in Messages API on
//! 127.0.0.1) and to the step (through this build's `airlock policy eval`), and the two must
//! agree on every call, or differ only where the corpus says Claude Code allows by design and
//! the step escalates.
//!
//! `.ci/run` installs `examples/agents/requirements.txt` into `.venv`. Without it the test
//! skips with the reason, except under `CI`, where it fails.

use airlock_tests::{run_pytest, venv_python};

#[test]
fn the_step_decides_the_corpus_as_claude_code_does() {
    let needed = "the agent examples' requirements (python3 -m venv .venv && .venv/bin/pip install -r examples/agents/requirements.txt)";
    let Some(python) = venv_python("claude_agent_sdk, pytest", needed) else {
        return;
    };
    run_pytest(&python, "tests/claude_permissions");
}
