//! The agent examples' suite (`examples/agents`): an OpenAI Agents SDK agent, a LangGraph
//! graph, a Claude Agent SDK permission callback, a Managed Agents custom-tool round trip and
//! Claude Code's hooks (HTTP hooks to the gateway, and `airlock hook`), each getting its tool
//! approvals from `airlock gateway`, and the MCP SDK and Claude Code through `airlock mcp`
//! (`mcp_proxy`), run with the repository's virtual environment against the test broker and
//! this build's `airlock` (the suite starts its own worker and gateway, and the hooks example a
//! reviewer service). Every model and session API is a stand-in on 127.0.0.1.
//!
//! `.ci/run` installs `examples/agents/requirements.txt` into `.venv`. Without it the test
//! skips with the reason, except under `CI`, where it fails.

use airlock_tests::{run_pytest, venv_python};

#[test]
fn agent_examples_suite() {
    let needed = "the agent examples' requirements (python3 -m venv .venv && .venv/bin/pip install -r examples/agents/requirements.txt)";
    let Some(python) = venv_python("agents, langgraph, claude_agent_sdk, mcp, standardwebhooks, httpx, pytest", needed)
    else {
        return;
    };
    run_pytest(&python, "examples/agents");
}
