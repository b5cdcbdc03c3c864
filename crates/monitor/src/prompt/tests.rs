use serde_json::json;

use super::*;

fn call(function: &str, arguments: serde_json::Value) -> v1::ToolCall {
    v1::ToolCall {
        id: "c1".into(),
        function: function.into(),
        arguments_json: arguments.to_string(),
        ..Default::default()
    }
}

fn message(role: &str, text: &str) -> v1::ChatMessage {
    v1::ChatMessage { role: role.into(), text: text.into(), ..Default::default() }
}

fn task(body: v1::request::Body) -> v1::StepTask {
    v1::StepTask {
        request: Some(v1::Request { body: Some(body), ..Default::default() }),
        name: "monitor".into(),
        ..Default::default()
    }
}

fn approval() -> v1::StepTask {
    let mut assistant = message("assistant", "Let me clean up.");
    assistant.tool_calls.push(call("bash", json!({"cmd": "rm -rf ~"})));
    task(v1::request::Body::Approval(v1::ApprovalRequest {
        message: "Let me clean up.".into(),
        call: Some(call("bash", json!({"cmd": "rm -rf ~"}))),
        view: Some(v1::ToolCallView {
            call: Some(v1::ToolCallContent {
                title: Some("bash".into()),
                format: "markdown".into(),
                content: "```\nrm -rf ~\n```".into(),
            }),
            context: None,
        }),
        history: vec![message("system", "You are helpful."), message("user", "Tidy my home directory."), assistant],
        history_omitted: 0,
        generation: None,
    }))
}

#[test]
fn the_default_prompt_shows_call_view_and_history() {
    let prompt = Template::default().render(&approval(), Limits::default()).unwrap();
    assert_eq!(prompt.system, SYSTEM);
    let user = &prompt.user;
    assert!(user.contains("Kind of check: approval (the call has not run yet)"), "{user}");
    assert!(user.contains("<untrusted>\nbash(cmd='rm -rf ~')\n</untrusted>"), "Inspect's rendering: {user}");
    assert!(user.contains("Call (bash):\n```\nrm -rf ~\n```"), "{user}");
    assert!(user.contains("[user]\nTidy my home directory.\n"), "{user}");
    assert!(user.contains("-> calls bash({\"cmd\":\"rm -rf ~\"})"), "{user}");
    // Approvals have no result.
    assert!(user.contains("The tool's result (reviews only):\n<untrusted>\n(none)\n</untrusted>"), "{user}");
    assert!(!user.contains("{{"), "{user}");
}

#[test]
fn a_review_shows_the_result_and_its_error() {
    let review = task(v1::request::Body::Review(v1::ReviewRequest {
        call: Some(call("bash", json!({"cmd": "cat /etc/shadow"}))),
        output: "root:$6$...".into(),
        result: Some(v1::ChatMessage {
            role: "tool".into(),
            error: Some(v1::ToolCallError { r#type: "permission".into(), message: "denied".into() }),
            ..Default::default()
        }),
        ..Default::default()
    }));
    let template = Template::parse("{{kind}} | {{function}} | {{arguments}} | {{ output }}").unwrap();
    let user = template.render(&review, Limits::default()).unwrap().user;
    assert_eq!(
        user,
        "review (the call ran; its result is below) | bash | {\"cmd\":\"cat /etc/shadow\"} | root:$6$...\n[the tool returned an error: permission: denied]"
    );
}

#[test]
fn long_content_is_bounded_keeping_recent_history() {
    let mut t = approval();
    let Some(v1::request::Body::Approval(a)) = &mut t.request.as_mut().unwrap().body else { panic!() };
    a.history = (0..100).map(|i| message("user", &format!("message {i} {}", "é".repeat(300)))).collect();
    a.history_omitted = 5;
    a.call = Some(call("write", json!({"text": "a".repeat(50_000)})));
    let limits = Limits { history: 2_000, message: 100, field: 1_000 };
    let user = Template::parse("{{history}}\n---\n{{call}}").unwrap().render(&t, limits).unwrap().user;
    let (history, rendered) = user.split_once("\n---\n").unwrap();
    assert!(history.len() <= 2_100, "{}", history.len());
    assert!(history.contains("message 99 "), "the latest message is kept");
    assert!(!history.contains("message 0 "), "the oldest is dropped");
    let dropped: usize = history.trim_start_matches('[').split(' ').next().unwrap().parse().unwrap();
    let kept = history.matches("[user]").count();
    assert_eq!(dropped, 5 + 100 - kept, "{history}");
    assert!(history.contains("more characters left out]"));
    assert!(rendered.starts_with("write(text='aaa") && rendered.ends_with("more characters left out]"), "{rendered}");
    assert!(rendered.chars().count() < 1_100);
}

#[test]
fn templates_are_checked_when_loaded() {
    assert!(Template::parse("{{call}} and {{ history }}").is_ok());
    let error = Template::parse("{{call}} {{hisotry}}").unwrap_err().to_string();
    assert!(error.contains("unknown placeholder '{{hisotry}}'"), "{error}");
    assert!(Template::parse("{{call").unwrap_err().to_string().contains("never closed"));
    assert!(Template::parse("no placeholders, {single} braces are text").is_ok());
}

#[test]
fn a_task_without_a_call_is_refused() {
    let t = task(v1::request::Body::Approval(v1::ApprovalRequest::default()));
    assert_eq!(Template::default().render(&t, Limits::default()).unwrap_err().0, "the request has no call");
    assert!(Template::default().render(&v1::StepTask::default(), Limits::default()).is_err());
}
