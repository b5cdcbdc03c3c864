use serde_json::json;

use super::*;

fn call(value: serde_json::Value) -> Call {
    Call::from_json(&value).unwrap()
}

#[test]
fn keeps_argument_order_and_quotes_strings_without_escaping() {
    let c = call(json!({"function": "computer", "arguments": {"text": "it's\n", "action": "key"}}));
    assert_eq!(format_function_call(&c), "computer(text='it's\n', action='key')");
}

#[test]
fn renders_scalars_like_python_str() {
    let c: Call = serde_json::from_str::<serde_json::Value>(
        r#"{"function": "f", "arguments": {"a": 10, "b": true, "c": null, "d": 1.5, "e": 1e16, "f": -0, "g": 123456789012345678901234567890}}"#,
    )
    .map(call)
    .unwrap();
    assert_eq!(
        format_function_call(&c),
        "f(a=10, b=True, c=None, d=1.5, e=1e+16, f=0, g=123456789012345678901234567890)"
    );
}

#[test]
fn floats_follow_python_repr() {
    for (x, want) in [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (0.1, "0.1"),
        (1e-4, "0.0001"),
        (1e-5, "1e-05"),
        (1.5e-7, "1.5e-07"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e+16"),
        (1.2345e100, "1.2345e+100"),
        (f64::INFINITY, "inf"),
        (f64::NAN, "nan"),
    ] {
        assert_eq!(float_repr(x), want, "{x:e}");
    }
}

#[test]
fn containers_use_repr_and_sorted_keys() {
    let c = call(
        json!({"function": "f", "arguments": {"items": ["a'b", "q\"", "both'\"", 1, [true]], "d": {"z": 1, "a": "\u{7}é\u{200b}"}}}),
    );
    assert_eq!(
        format_function_call(&c),
        r#"f(items=["a'b", 'q"', 'both\'"', 1, [True]], d={'a': '\x07é\u200b', 'z': 1})"#
    );
}

#[test]
fn call_expressions_tell_apart_calls_that_render_alike() {
    let two = call(json!({"function": "f", "arguments": {"a": "x", "b": "y"}}));
    let crafted = call(json!({"function": "f", "arguments": {"a": "x', b='y"}}));
    let key = call(json!({"function": "f", "arguments": {"a='x', b": "y"}}));
    assert_eq!(format_function_call(&two), format_function_call(&crafted), "Inspect's text is ambiguous");
    assert_eq!(format_function_call(&two), format_function_call(&key));
    assert_eq!(format_call_expression(&two), "f(a='x', b='y')");
    assert_eq!(format_call_expression(&crafted), "f(a=\"x', b='y\")");
    assert_eq!(format_call_expression(&key), "f(\"a='x', b\"='y')");
    let lines = call(json!({"function": "bash", "arguments": {"cmd": "ls\nrm -rf /", "n": [1, "two"], "_k2": null}}));
    assert_eq!(format_call_expression(&lines), "bash(cmd='ls\\nrm -rf /', n=[1, 'two'], _k2=None)");
}
