use serde_json::Value;

use super::*;

/// The call, or the error's words, as reading the text into a JSON value and then
/// [`Call::from_json`] gives them.
fn through_value(text: &str) -> Result<Call, String> {
    serde_json::from_str::<Value>(text)
        .map_err(|e| e.to_string())
        .and_then(|v| Call::from_json(&v).map_err(|e| e.to_string()))
}

#[test]
fn reading_text_gives_the_call_or_the_words_of_reading_a_value() {
    let nested = |depth| format!(r#"{{"function": "ls", "extra": {}{}}}"#, "[".repeat(depth), "]".repeat(depth));
    let cases = [
        // Decided by the object's keys, the last of a repeated key winning.
        r#"{"id": "c1", "function": "bash", "arguments": {"cmd": "ls\n", "timeout": 30}}"#,
        r#"{"function": "ls"}"#,
        r#"{"function": "ls", "arguments": null}"#,
        r#"{"function": "a", "function": "bash", "arguments": 3, "arguments": {"b": 1, "a": 2, "b": 3}}"#,
        r#"{"func\u0074ion": "ls", "arg\u0075ments": {"k\u00e9y": "v\u00e9"}}"#,
        r#"{"function": "ls", "type": "function", "view": {"nested": [1, 2.50, 1e400, null]}}"#,
        r#"  {"function": "ls"}  "#,
        // Not calls.
        r#"{}"#,
        r#"{"id": 3}"#,
        r#"{"id": null, "function": "ls"}"#,
        r#"{"function": 3}"#,
        r#"{"function": 1, "arguments": [1]}"#,
        "[]",
        "3",
        "-1.5e3",
        r#""ls""#,
        "null",
        // Not JSON, wherever the fault is.
        "not json",
        r#"{"function": "ls""#,
        r#"{"function": "ls"} trailing"#,
        r#"{"function": "ls",}"#,
        r#"{"function": 3, "arguments": [1,]}"#,
        r#"{"function": "ls", "extra": "\ud800"}"#,
        r#"{"function": "ls", "extra": 01}"#,
        // serde_json's private number marker reads as a number only as a value's first key.
        r#"{"$serde_json::private::Number": "3", "function": "ls"}"#,
        r#"{"$serde_json::private::Number": "x", "function": "ls"}"#,
        r#"{"function": "ls", "$serde_json::private::Number": "3"}"#,
    ];
    let deep = [nested(126), nested(127), nested(200)];
    for text in cases.iter().copied().chain(deep.iter().map(String::as_str)) {
        let read = Call::from_json_str(text).map_err(|e| e.to_string());
        assert_eq!(read, through_value(text), "{text}");
    }
    assert_eq!(
        Call::from_json_str(r#"{"function": "a", "function": "bash", "arguments": {"b": 1, "a": 2, "b": 3}}"#)
            .unwrap()
            .arguments
            .into_iter()
            .collect::<Vec<_>>(),
        [("b".to_owned(), Value::from(3)), ("a".to_owned(), Value::from(2))]
    );
}
