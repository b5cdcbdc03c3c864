use super::*;

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
