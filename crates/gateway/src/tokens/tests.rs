//! The gateway's tokens file: a token names its entry, policies by name or star, bad entries
//! refused with the reason, `add-token`.

use super::*;

fn entry(name: &str, token: &str, policies: &[&str], inline: bool) -> TokenEntry {
    TokenEntry {
        name: name.into(),
        token_sha256: sha256_hex(token),
        policies: policies.iter().map(|p| (*p).to_owned()).collect(),
        inline,
    }
}

#[test]
fn a_token_names_its_entry_and_nothing_else() {
    let tokens = Tokens::from_list(vec![entry("a", "ta", &["p"], false), entry("b", "tb", &["*"], true)]);
    assert_eq!(tokens.authenticate("ta").map(|e| e.name.as_str()), Some("a"));
    assert_eq!(tokens.authenticate("tb").map(|e| e.name.as_str()), Some("b"));
    assert!(tokens.authenticate("tc").is_none());
    assert!(tokens.authenticate("").is_none());
    assert!(tokens.authenticate("t a").is_none());
    assert!(tokens.authenticate(&sha256_hex("ta")).is_none(), "the hash itself is no token");
}

#[test]
fn policies_are_allowed_by_name_or_by_star() {
    let a = entry("a", "ta", &["alpha"], false);
    assert!(a.may_use("alpha"));
    assert!(!a.may_use("beta"));
    assert!(!a.may_use("alpha*"));
    assert!(entry("s", "ts", &["*"], false).may_use("anything"));
}

#[test]
fn a_file_with_bad_entries_is_refused_with_the_reason() {
    let hash = sha256_hex("t");
    let cases = [
        ("- {name: a, token_sha256: abc, policies: [p]}", "64 hex digits"),
        (&format!("- {{name: 'a b', token_sha256: {hash}, policies: [p]}}") as &str, "letters, digits"),
        (&format!("- {{name: a, token_sha256: {hash}}}"), "at least one policy"),
        (
            &format!(
                "- {{name: a, token_sha256: {hash}, policies: [p]}}\n- {{name: a, token_sha256: {}, policies: [p]}}",
                sha256_hex("u")
            ),
            "listed twice",
        ),
        (
            &format!(
                "- {{name: a, token_sha256: {hash}, policies: [p]}}\n- {{name: b, token_sha256: {hash}, policies: [p]}}"
            ),
            "token of another",
        ),
        (&format!("- {{name: a, token_sha256: {hash}, policies: [p], pools: [x]}}"), "pools"),
    ];
    for (text, expected) in cases {
        let error = Tokens::parse(text, "tokens.yaml").unwrap_err().to_string();
        assert!(error.contains(expected), "{text}: {error}");
    }
}

#[test]
fn add_token_appends_an_entry_whose_token_authenticates() {
    let dir = std::env::temp_dir().join(format!("airlock-gateway-tokens-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokens.yaml");
    let first = add_token(&path, "alpha", &["a".into()], false).unwrap();
    let second = add_token(&path, "beta", &[], true).unwrap();
    assert!(add_token(&path, "beta", &["b".into()], false).unwrap_err().to_string().contains("exists already"));
    assert!(add_token(&path, "gamma", &[], false).unwrap_err().to_string().contains("at least one policy"));
    let tokens = Tokens::load(&path).unwrap();
    assert_eq!(tokens.len(), 2);
    let alpha = tokens.authenticate(&first).unwrap();
    assert!(alpha.may_use("a") && !alpha.inline);
    let beta = tokens.authenticate(&second).unwrap();
    assert!(beta.inline && !beta.may_use("a"));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(&first) && !text.contains(&second), "tokens are not stored");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    std::fs::remove_dir_all(dir).unwrap();
}
