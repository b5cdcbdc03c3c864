use super::*;

#[test]
fn reads_inspect_entries_and_folds_extra_keys_into_params() {
    let text = "approvers:\n  - name: human\n    tools: web_browser*, bash\n    choices: [approve, reject]\n  - name: auto\n    tools: \"*\"\n    params: {decision: reject}\n    decision: approve\nother: 1\n";
    let doc = Document::parse("p.yaml", text).unwrap();
    let entries = doc.entries(Kind::Approval).unwrap();
    assert_eq!(entries[0].name, "human");
    assert_eq!(entries[0].tools, ["web_browser*, bash"]);
    assert_eq!(entries[0].params["choices"], serde_json::json!(["approve", "reject"]));
    // Keys beside `name` win over `params`, as in Inspect's `params | unknown_fields`.
    assert_eq!(entries[1].params["decision"], "approve");
    assert_eq!(doc.ignored_keys[0].0, "other");
    assert!(doc.entries(Kind::Review).is_err());
}

#[test]
fn merge_keys_and_yaml_1_1_booleans_follow_pyyaml() {
    let text = "base: &base\n  tools: bash\n  allow_sudo: yes\napprovers:\n  - <<: *base\n    name: bash_allowlist\n";
    let doc = Document::parse("p.yaml", text).unwrap();
    let entry = &doc.entries(Kind::Approval).unwrap()[0];
    assert_eq!(entry.tools, ["bash"]);
    assert_eq!(entry.params["allow_sudo"], true);
}

#[test]
fn json_is_detected_by_its_brace() {
    let doc = Document::parse("p", "  {\"reviewers\": [{\"name\": \"auto\", \"tools\": [\"a\", \"b\"]}]}").unwrap();
    assert_eq!(doc.entries(Kind::Review).unwrap()[0].tools, ["a", "b"]);
    let err = Document::parse("p.json", "{\"reviewers\": [}").unwrap_err();
    assert!(err.message.starts_with("invalid JSON"), "{err}");
    assert_eq!(err.location.line, 1);
}

#[test]
fn errors_point_at_the_node() {
    let err = Document::parse("p.yaml", "approvers:\n  - name: auto\n    tools: 3\n").unwrap_err();
    assert_eq!((err.location.line, err.location.column), (3, 12));
    assert!(err.to_string().starts_with("p.yaml:3:12: 'tools' must be a string"), "{err}");
    let err = Document::parse("p.yaml", "approvers:\n  - name: auto\n    tools: *\n").unwrap_err();
    assert_eq!(err.location.line, 3, "{err}");
}
