use serde_json::json;

use super::*;

const BOUNDS: Bounds = Bounds { max_timeout: Duration::from_secs(600) };

fn body() -> Value {
    json!({
        "call": {"id": "c1", "function": "bash", "arguments": {"cmd": "ls", "a": 1}},
        "policy": {"name": "default"},
        "origin": {"run": "r", "sample": 7, "epoch": 2},
    })
}

fn refused(kind: Kind, body: &Value) -> Invalid {
    parse(kind, body.to_string().as_bytes(), BOUNDS).expect_err("refused")
}

#[test]
fn a_minimal_approval_reads_with_its_argument_order() {
    let submission = parse(Kind::Approval, body().to_string().as_bytes(), BOUNDS).unwrap();
    assert_eq!(submission.call.arguments.keys().collect::<Vec<_>>(), ["cmd", "a"]);
    assert_eq!(submission.origin, Origin { run: "r".into(), sample: "7".into(), epoch: 2 });
    assert_eq!(submission.policy, PolicyChoice::Named("default".into()));
    assert_eq!(submission.default_idempotency_key(), "approval/r/7/2/c1");
    let request = submission.to_request();
    assert_eq!(request.key.unwrap().tool_call_id, "c1");
    assert_eq!(request.origin.unwrap().sample_id, "7");
}

#[test]
fn a_review_carries_its_output_and_history() {
    let mut body = body();
    body["output"] = json!("total 0");
    body["policy"] = json!({"inline": "reviewers: []\n"});
    body["messages"] = json!([
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": [{"type": "text", "text": "sure"}, {"type": "image", "image": "x"}],
         "tool_calls": [{"id": "c1", "function": "bash", "arguments": {"cmd": "ls"}}]},
    ]);
    let submission = parse(Kind::Review, body.to_string().as_bytes(), BOUNDS).unwrap();
    let Some(v1::request::Body::Review(review)) = submission.to_request().body else { panic!("a review") };
    assert_eq!((review.output.as_str(), review.message.as_str()), ("total 0", "sure"));
    assert_eq!(review.history.len(), 2);
    assert!(review.history[1].raw_json.contains("image"), "non-text content travels whole");
    assert_eq!(review.history[1].tool_calls[0].arguments_json, r#"{"cmd":"ls"}"#);
}

#[test]
fn every_malformed_field_is_named_with_what_it_must_be() {
    type Change = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(Change, &str, &str)> = vec![
        (Box::new(|b| b["call"].as_object_mut().unwrap().remove("id").map(drop).unwrap()), "call.id", "is required"),
        (Box::new(|b| b["call"]["id"] = json!("")), "call.id", "must not be empty"),
        (Box::new(|b| b["call"]["id"] = json!(5)), "call.id", "must be a string"),
        (Box::new(|b| b["call"]["arguments"] = json!("cmd=ls")), "call.arguments", "must be a JSON object"),
        (Box::new(|b| b["call"]["arguments"] = json!([1])), "call.arguments", "must be a JSON object"),
        (
            Box::new(|b| b["call"].as_object_mut().unwrap().remove("arguments").map(drop).unwrap()),
            "call.arguments",
            "is required",
        ),
        (Box::new(|b| b["call"] = json!("bash")), "call", "must be a JSON object"),
        (Box::new(|b| b["call"]["extra"] = json!(1)), "call.extra", "is not a field"),
        (Box::new(|b| b["policy"] = json!({"name": "a", "inline": "b"})), "policy", "exactly one of name or inline"),
        (Box::new(|b| b["policy"] = json!({})), "policy", "exactly one of name or inline"),
        (Box::new(|b| b["policy"] = json!({"name": ""})), "policy.name", "must not be empty"),
        (Box::new(|b| b.as_object_mut().unwrap().remove("policy").map(drop).unwrap()), "policy", "is required"),
        (Box::new(|b| b["origin"]["epoch"] = json!(0)), "origin.epoch", "from 1"),
        (Box::new(|b| b["origin"]["sample"] = json!(1.5)), "origin.sample", "string or an integer"),
        (Box::new(|b| b.as_object_mut().unwrap().remove("origin").map(drop).unwrap()), "origin", "is required"),
        (Box::new(|b| b["output"] = json!("x")), "output", "only for reviews"),
        (Box::new(|b| b["timeout"] = json!(0)), "timeout", "above 0"),
        (Box::new(|b| b["timeout"] = json!(-3)), "timeout", "above 0"),
        (Box::new(|b| b["timeout"] = json!(601)), "timeout", "at most 600"),
        (Box::new(|b| b["timeout"] = json!("10")), "timeout", "number of seconds"),
        (Box::new(|b| b["callback_url"] = json!("ftp://example.com/x")), "callback_url", "http:// or https://"),
        (Box::new(|b| b["callback_url"] = json!("file:///etc/passwd")), "callback_url", "http:// or https://"),
        (Box::new(|b| b["callback_url"] = json!("not a url")), "callback_url", "is not a URL"),
        (Box::new(|b| b["callback_url"] = json!("https://u:p@example.com/")), "callback_url", "credentials"),
        (Box::new(|b| b["messages"] = json!({"role": "user"})), "messages", "array of messages"),
        (Box::new(|b| b["messages"] = json!([{"role": "robot", "content": "x"}])), "messages[0].role", "system, user"),
        (
            Box::new(|b| b["messages"] = json!([{"role": "user", "content": 3}])),
            "messages[0].content",
            "string or a list",
        ),
        (
            Box::new(|b| {
                b["messages"] =
                    json!([{"role": "assistant", "tool_calls": [{"id": "x", "function": "f", "arguments": 1}]}])
            }),
            "messages[0].tool_calls[0].arguments",
            "JSON object",
        ),
        (Box::new(|b| b["kind"] = json!("review")), "kind", "is not a field"),
        // The document allows no null at the top: a field is left out for none.
        (Box::new(|b| b["callback_url"] = json!(null)), "callback_url", "must be a string"),
        (Box::new(|b| b["timeout"] = json!(null)), "timeout", "number of seconds"),
        (Box::new(|b| b["messages"] = json!(null)), "messages", "array of messages"),
        (Box::new(|b| b["output"] = json!(null)), "output", "only for reviews"),
        (Box::new(|b| b["origin"]["epoch"] = json!(null)), "origin.epoch", "from 1"),
        (Box::new(|b| b["origin"]["epoch"] = json!(4_294_967_296_u64)), "origin.epoch", "to 4294967295"),
        (
            Box::new(|b| {
                b["messages"] = json!([{"role": "assistant", "tool_calls": [
                    {"id": "x", "function": "f", "arguments": {}, "type": "function"}]}])
            }),
            "messages[0].tool_calls[0].type",
            "is not a field",
        ),
        (
            Box::new(|b| b["messages"] = json!([{"role": "user", "content": [{"type": "text", "text": 5}]}])),
            "messages[0].content[0].text",
            "must be a string",
        ),
        (
            Box::new(|b| b["messages"] = json!([{"role": "user", "content": [{"type": 5}]}])),
            "messages[0].content[0].type",
            "must be a string",
        ),
        (
            Box::new(|b| b["messages"] = json!([{"role": "tool", "error": {"type": "timeout", "message": 5}}])),
            "messages[0].error.message",
            "must be a string",
        ),
    ];
    for (change, field, words) in cases {
        let mut body = body();
        change(&mut body);
        let invalid = refused(Kind::Approval, &body);
        assert!(!invalid.unreadable, "{body}");
        assert_eq!(invalid.field.as_deref(), Some(field), "{body}");
        assert!(invalid.message.contains(words), "{body}: {}", invalid.message);
        assert!(invalid.message.starts_with(field), "{}", invalid.message);
    }
}

#[test]
fn a_body_that_is_not_a_json_object_is_unreadable() {
    for text in ["", "{", "[1]", "\"x\"", "null"] {
        let invalid = parse(Kind::Approval, text.as_bytes(), BOUNDS).unwrap_err();
        assert!(invalid.unreadable && invalid.field.is_none(), "{text}");
    }
}

#[test]
fn review_output_must_be_text() {
    let mut body = body();
    body["output"] = json!({"stdout": "x"});
    assert_eq!(refused(Kind::Review, &body).field.as_deref(), Some("output"));
}

#[test]
fn idempotency_keys_are_visible_ascii_and_bounded() {
    assert_eq!(idempotency_key(b"abc-123").unwrap(), "abc-123");
    for bad in [&b""[..], b"a b", b"caf\xc3\xa9", &[b'a'; MAX_IDEMPOTENCY_KEY + 1]] {
        assert!(idempotency_key(bad).is_err());
    }
}

#[test]
fn integers_are_read_as_json_schema_counts_them_and_message_fields_may_be_null() {
    let mut body = body();
    body["origin"] = json!({"run": "r", "sample": 123_456_789_012_345_678_901_234_567_890_u128, "epoch": 816.0});
    body["messages"] = json!([{"role": "tool", "content": null, "tool_calls": null, "tool_call_id": null,
                               "function": null, "id": null, "error": null}]);
    let submission = parse(Kind::Approval, body.to_string().as_bytes(), BOUNDS).unwrap();
    assert_eq!(submission.origin.sample, "123456789012345678901234567890", "its digits, however many");
    assert_eq!(submission.origin.epoch, 816);
    body["origin"]["sample"] = json!(-4.0);
    assert_eq!(parse(Kind::Approval, body.to_string().as_bytes(), BOUNDS).unwrap().origin.sample, "-4");
}
