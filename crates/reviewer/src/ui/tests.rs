use super::*;
use crate::fixtures::{explained, reviewer};

/// Vectors produced by Inspect's own `display_safe` (inspect-ai 0.3.285).
#[test]
fn display_safe_matches_inspect() {
    let vectors = [
        ("plain", "plain", false),
        ("a\x1b[31mred\x1b[0m", "a‹U+001B›[31mred‹U+001B›[0m", true),
        ("tab\there\nnl\r", "tab\there\nnl‹U+000D›", true),
        ("abc\u{202e}dcba", "abc‹U+202E›dcba", true),
        ("zero\u{200b}width\u{feff}", "zero‹U+200B›width‹U+FEFF›", true),
        ("\u{2039}U+0041\u{203a}", "‹U+2039›U+0041›", true),
        ("tag\u{E0041}", "tag‹U+E0041›", true),
        ("del\x7f c1\u{9b}", "del‹U+007F› c1‹U+009B›", true),
        ("isolate\u{2066}x\u{2069}", "isolate‹U+2066›x‹U+2069›", true),
    ];
    for (input, shown, escaped) in vectors {
        assert_eq!((display_safe(input), has_unsafe(input)), (shown.to_owned(), escaped), "{input:?}");
    }
}

#[test]
fn html_is_escaped_and_markers_stand_out() {
    let html = safe_html("<script>alert(1)</script> & \"q\" \u{202e}x");
    assert_eq!(
        html,
        "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&quot; \
         <span class=\"ctl\" title=\"an invisible or control character\">‹U+202E›</span>x"
    );
}

#[test]
fn markdown_never_passes_html_links_or_images_through() {
    let html = markdown_html(
        "# Title\n\n<script>alert(1)</script>\n\nText <b onclick=\"x()\">bold</b> \
         [click](javascript:alert(1)) ![img](http://evil.example/x.png)\n\n```python\nprint('<hi>')\n```\n",
    );
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("<b "), "{html}");
    assert!(!html.contains("<a "), "{html}");
    assert!(!html.contains("<img"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
    assert!(html.contains("click &lt;javascript:alert(1)&gt;"), "{html}");
    assert!(html.contains("[image: img] &lt;http://evil.example/x.png&gt;"), "{html}");
    assert!(html.contains("<h1>Title</h1>"), "{html}");
    assert!(html.contains("print(&#39;&lt;hi&gt;&#39;)") || html.contains("print('&lt;hi&gt;')"), "{html}");
}

#[test]
fn the_default_view_is_the_rendered_call_and_placeholders_are_filled() {
    let call = v1::ToolCall {
        id: "c1".into(),
        function: "bash".into(),
        arguments_json: r#"{"cmd": "ls ```", "n": 2}"#.into(),
        ..Default::default()
    };
    let shown = shown(Some(&call), None, None);
    assert!(shown.call.markdown);
    assert_eq!(shown.call.text, "````python\nbash(cmd='ls ```', n=2)\n````");

    let view = v1::ToolCallView {
        context: None,
        call: Some(v1::ToolCallContent {
            title: Some("Run {{cmd}}".into()),
            format: "text".into(),
            content: "$ {{cmd}} {{missing}}".into(),
        }),
    };
    let shown = super::shown(Some(&call), Some(&view), Some(Returned { message: None, output: "out" }));
    assert_eq!(shown.call.title.as_deref(), Some("Run ls ```"));
    assert_eq!(shown.call.text, "$ ls ``` {{missing}}\n\nResult\n\nout");
}

/// [`explained`]'s task, pending, as a card.
fn explained_card(incoming: &crate::task::Incoming) -> String {
    card::card(&incoming.pending("t1", 1_000), &reviewer("alice"), "csrf", 2_000)
}

#[test]
fn the_trail_shows_a_monitors_score_reason_and_model_by_name() {
    let card = explained_card(&explained("ops", "s1", "c1"));
    assert!(card.contains("<h3>Why it is here</h3>"), "{card}");
    assert!(card.contains("<span class=\"step\">step 0</span> <span class=\"approver\">monitor</span>"), "{card}");
    assert!(card.contains("<span class=\"badge escalate\">escalate</span> <span class=\"by\">by monitor-1</span>"));
    assert!(card.contains("<p class=\"why\">Score 5 is between approve_below 3 and escalate_below 8.</p>"), "{card}");
    let score = card.find("<dt>Score</dt><dd>5</dd>").expect("the score");
    let reason = card.find("<dt>Reason</dt><dd>deletes a directory</dd>").expect("the reason");
    let model = card.find("<dt>Model</dt><dd>fake-openai</dd>").expect("the model");
    assert!(score < reason && reason < model, "{card}");
    assert!(card.contains("<div class=\"other\"><dt>attempts</dt><dd>1</dd></div>"), "{card}");
    assert!(!card.contains("&quot;score&quot;") && !card.contains("{\"score"), "no raw JSON: {card}");
}

#[test]
fn metadata_that_is_not_an_object_is_one_field() {
    assert_eq!(read_metadata(""), Metadata::default());
    let fields = read_metadata("[1, 2]").fields;
    assert_eq!(fields, [Field { label: "Metadata".into(), value: "[1, 2]".into(), monitor: false }]);
    let fields = read_metadata(r#"{"thresholds": {"approve_below": 3}, "reason": "r"}"#).fields;
    assert_eq!(fields[0], Field { label: "Reason".into(), value: "r".into(), monitor: true });
    assert_eq!(fields[1], Field { label: "thresholds".into(), value: r#"{"approve_below":3}"#.into(), monitor: false });
}

#[test]
fn the_policy_is_named_with_its_digest() {
    let mut incoming = explained("ops", "s1", "c1");
    let inline = explained_card(&incoming);
    let digest = airlock_policy::document::digest(crate::fixtures::POLICY);
    assert!(
        inline.contains(&format!("Policy <span class=\"name\">inline document</span> <code class=\"digest\" title=\"sha256 of the policy's text\">{digest}</code>")),
        "{inline}"
    );
    let request = incoming.human.task.as_mut().unwrap().request.as_mut().unwrap();
    request.policy =
        Some(v1::Policy { source: Some(v1::policy::Source::Name("prod".into())), digest: "0123abcd".into() });
    let named = explained_card(&incoming);
    assert!(named.contains("Policy <span class=\"name\">prod</span> <code class=\"digest\""), "{named}");
    assert!(named.contains(">0123abcd</code>"), "{named}");
}

#[test]
fn the_conversation_is_collapsed_and_complete() {
    let card = explained_card(&explained("ops", "s1", "c1"));
    let start = card.find("<details class=\"conversation\">").expect("collapsed: no open attribute");
    let end = card.find("</details>").unwrap();
    let conversation = &card[start..end];
    assert!(conversation.contains("<summary>Conversation (3 messages, 2 earlier left out)</summary>"), "{card}");
    assert!(conversation.contains("<span class=\"role\">user</span><div class=\"text\">Free some disk space.</div>"));
    assert!(conversation.contains("<span class=\"role\">tool</span> <code class=\"fn\">df</code>"), "{conversation}");
    assert!(conversation.contains("<pre class=\"text\">bash(cmd=&#39;rm -r build&#39;)</pre>"), "{conversation}");
    // Without a conversation there is nothing to open.
    assert!(
        !card::card(&crate::fixtures::human("ops", "s", "c", false, 0).pending("t", 0), &reviewer("alice"), "x", 0)
            .contains("<details class=\"conversation\"")
    );
}

#[test]
fn the_view_keeps_its_format_and_code_blocks_their_language() {
    let mut incoming = explained("ops", "s1", "c1");
    let request = incoming.human.task.as_mut().unwrap().request.as_mut().unwrap();
    let Some(v1::request::Body::Approval(body)) = request.body.as_mut() else { panic!() };
    let content = |format: &str, content: &str| v1::ToolCallContent {
        title: None,
        format: format.into(),
        content: content.into(),
    };
    body.view = Some(v1::ToolCallView {
        context: Some(content("text", "## not a heading\n{{cmd}}")),
        call: Some(content("markdown", "Run this:\n\n```bash\n{{cmd}}\n```\n")),
    });
    let card = explained_card(&incoming);
    assert!(card.contains("<pre class=\"text\">## not a heading\nrm -r build</pre>"), "{card}");
    assert!(card.contains("<code class=\"language-bash\">rm -r build\n</code>"), "{card}");
}

#[test]
fn the_card_names_who_asked_when_the_task_says() {
    let mut incoming = explained("ops", "s1", "c1");
    assert!(!explained_card(&incoming).contains("class=\"caller\""), "a task that names nobody");
    let task = incoming.human.task.as_mut().unwrap();
    task.requested_by = "gateway".into();
    task.request.as_mut().unwrap().key.as_mut().unwrap().tenant = "<b>gamma</b>".into();
    let card = explained_card(&incoming);
    let asked = "<p class=\"caller\">Asked by <span class=\"name\">gateway</span> for <span class=\"name\">&lt;b&gt;gamma&lt;/b&gt;</span></p>";
    assert!(card.contains(asked), "{card}");
}

#[test]
fn hostile_text_in_every_new_field_is_shown_not_run() {
    const HOSTILE: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>";
    let mut incoming = explained("ops", "s1", "c1");
    let request = incoming.human.task.as_mut().unwrap().request.as_mut().unwrap();
    request.policy =
        Some(v1::Policy { source: Some(v1::policy::Source::Name(HOSTILE.into())), digest: HOSTILE.into() });
    let answer = &mut request.chain.as_mut().unwrap().trail[0];
    answer.approver = HOSTILE.into();
    answer.decided_by = HOSTILE.into();
    answer.explanation = Some(HOSTILE.into());
    answer.metadata_json = serde_json::json!({"reason": HOSTILE, "model": HOSTILE, HOSTILE: [HOSTILE]}).to_string();
    let Some(v1::request::Body::Approval(body)) = request.body.as_mut() else { panic!() };
    for message in &mut body.history {
        message.role = HOSTILE.into();
        message.text = HOSTILE.into();
        message.function = Some(HOSTILE.into());
        message.error = Some(v1::ToolCallError { r#type: HOSTILE.into(), message: HOSTILE.into() });
        for call in &mut message.tool_calls {
            call.function = HOSTILE.into();
            call.arguments_json = serde_json::json!({"cmd": HOSTILE}).to_string();
        }
    }
    let hostile = |format: &str| v1::ToolCallContent {
        title: Some(HOSTILE.into()),
        format: format.into(),
        content: HOSTILE.into(),
    };
    body.view = Some(v1::ToolCallView { context: Some(hostile("text")), call: Some(hostile("markdown")) });
    let card = explained_card(&incoming);
    assert!(!card.contains("<script") && !card.contains("<img"), "{card}");
    // Each field shows the text: the trail's approver, decider and explanation, two metadata
    // values and a key and its value; the policy's name and digest; five fields per message;
    // the view's two titles and two contents.
    let shown = card.matches("&lt;script&gt;alert(1)&lt;/script&gt;").count();
    assert!(shown >= 7 + 2 + 5 * 3 + 4, "{shown}: {card}");
    assert!(card.contains("<dt>Reason</dt><dd>&lt;script&gt;"), "{card}");
}

#[test]
fn a_pending_card_offers_every_identical_call_with_the_call_escaped_as_a_glob() {
    let mut incoming = crate::fixtures::human("ops", "s", "c", false, 0);
    let request = incoming.human.task.as_mut().and_then(|t| t.request.as_mut()).unwrap();
    let Some(v1::request::Body::Approval(body)) = request.body.as_mut() else { unreachable!() };
    body.call.as_mut().unwrap().arguments_json = r#"{"cmd": "rm -r *\"<b>"}"#.into();
    let card = card::card(&incoming.pending("t", 0), &reviewer("alice"), "x", 0);
    let start = card.find("<details class=\"standing\">").expect("the standing form");
    let form = &card[start..];
    assert!(form.contains("action=\"/ui/tasks/t/standing\""), "{form}");
    assert!(
        form.contains("value=\"bash(cmd=&#39;rm -r [*]&quot;&lt;b&gt;&#39;)\""),
        "escaped glob, escaped HTML: {form}"
    );
    for choice in ["approve", "reject", "terminate"] {
        assert!(form.contains(&format!("value=\"{choice}\"")), "{choice}: {form}");
    }
    assert!(!form.contains("modify"));
}

#[test]
fn the_console_and_the_card_read_the_same_why_from_a_task_and_its_view() {
    let mut incoming = explained("ops", "s1", "c1");
    incoming.human.task.as_mut().unwrap().requested_by = "gateway".into();
    let task = incoming.pending("t1", 1_000);
    let of_task = why::WhyHere::of_task(&task);
    assert!(of_task.asked.is_some() && of_task.policy.is_some() && !of_task.answers.is_empty(), "{of_task:?}");
    // The API's view of an answer names no step; all else reads the same.
    let answers = of_task.answers.iter().map(|answer| why::Answer { step: None, ..answer.clone() }).collect();
    let unstepped = why::WhyHere { answers, ..of_task };
    assert_eq!(why::WhyHere::of_view(&crate::http::api::task_view(&task)), unstepped);
}
