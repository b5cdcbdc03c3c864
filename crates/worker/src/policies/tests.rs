//! Named and inline policies: compiled once per text and kind, reloaded when their file changes,
//! errors without the policy dir, a poisoned cache that still serves.

use super::*;

fn named(name: &str) -> v1::Policy {
    v1::Policy { source: Some(v1::policy::Source::Name(name.into())), digest: String::new() }
}

fn inline(text: &str) -> v1::Policy {
    v1::Policy { source: Some(v1::policy::Source::Inline(text.into())), digest: String::new() }
}

#[test]
fn inline_policies_compile_once_per_text_and_kind() {
    let store = PolicyStore::new(None);
    let text = "approvers:\n  - name: auto\n    tools: a\nreviewers:\n  - name: auto\n    tools: b\n";
    let first = store.resolve(Some(&inline(text)), Kind::Approval).unwrap();
    let again = store.resolve(Some(&inline(text)), Kind::Approval).unwrap();
    assert!(Arc::ptr_eq(&first, &again), "a second request reuses the compiled policy");
    assert_eq!(first.digest(), airlock_policy::document::digest(text));
    let review = store.resolve(Some(&inline(text)), Kind::Review).unwrap();
    assert_eq!(review.kind(), Kind::Review);
    assert!(Arc::ptr_eq(&review, &store.resolve(Some(&inline(text)), Kind::Review).unwrap()));
    let other = store.resolve(Some(&inline(&text.replace("tools: a", "tools: c"))), Kind::Approval).unwrap();
    assert!(!Arc::ptr_eq(&first, &other));
    assert_ne!(first.digest(), other.digest());
    // A document that does not compile for a kind stays an error for that kind only.
    let approvals_only = "approvers:\n  - name: auto\n    tools: a\n";
    assert!(store.resolve(Some(&inline(approvals_only)), Kind::Approval).is_ok());
    assert!(matches!(store.resolve(Some(&inline(approvals_only)), Kind::Review), Err(PolicyLookupError::Invalid(_))));
    assert!(store.resolve(Some(&inline(approvals_only)), Kind::Approval).is_ok());
}

#[test]
fn named_policies_reload_when_their_file_changes() {
    let dir = std::env::temp_dir().join(format!("airlock-policies-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("strict.yaml");
    fs::write(&file, "approvers:\n  - name: auto\n    tools: a\n").unwrap();
    let store = PolicyStore::new(Some(dir.clone()));
    let first = store.resolve(Some(&named("strict")), Kind::Approval).unwrap();
    assert_eq!(first.steps().len(), 1);
    fs::write(&file, "approvers:\n  - name: auto\n    tools: a\n  - name: human\n    tools: b\n").unwrap();
    let second = store.resolve(Some(&named("strict")), Kind::Approval).unwrap();
    assert_eq!(second.steps().len(), 2);
    assert_ne!(first.digest(), second.digest());
    assert!(matches!(store.resolve(Some(&named("../etc")), Kind::Approval), Err(PolicyLookupError::Unknown(_))));
    assert!(matches!(store.resolve(Some(&named("missing")), Kind::Approval), Err(PolicyLookupError::Unknown(_))));
    assert!(matches!(store.resolve(Some(&named("strict")), Kind::Review), Err(PolicyLookupError::Invalid(_))));
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn errors_about_named_policies_never_show_the_policy_dir() {
    let dir = std::env::temp_dir().join(format!("airlock-policy-dir-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("broken.yaml"), "approvers:\n  - name: auto\n    tools: 3\n").unwrap();
    fs::create_dir_all(dir.join("folder.yaml")).unwrap();
    let store = PolicyStore::new(Some(dir.clone()));
    for name in ["broken", "missing", "folder", "../broken"] {
        let error = store.resolve(Some(&named(name)), Kind::Approval).unwrap_err().to_string();
        assert!(!error.contains(dir.to_str().unwrap()) && !error.contains("airlock-policy-dir"), "{error}");
        assert!(error.contains(name), "{error}");
    }
    let broken = store.resolve(Some(&named("broken")), Kind::Approval).unwrap_err().to_string();
    assert!(broken.starts_with("broken:3:12: 'tools' must be a string"), "{broken}");
    fs::remove_dir_all(dir).unwrap();
}

/// A panic while the cache is held (here: forced, in another thread) leaves it usable.
#[test]
fn a_poisoned_cache_still_serves() {
    let store = PolicyStore::new(None);
    let text = "approvers:\n  - name: auto\n    tools: a\n";
    std::thread::scope(|scope| {
        let poisoned = scope.spawn(|| {
            let _held = store.inline.lock().unwrap();
            panic!("a handler failed while holding the cache");
        });
        assert!(poisoned.join().is_err());
    });
    assert!(store.inline.is_poisoned());
    assert!(store.resolve(Some(&inline(text)), Kind::Approval).is_ok());
    assert!(store.resolve(Some(&inline(text)), Kind::Approval).is_ok(), "and again, from the cache");
}

#[test]
fn a_policy_sent_inline_cannot_make_the_worker_read_a_file() {
    let dir = std::env::temp_dir().join(format!("airlock-claude-settings-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let settings = dir.join("settings.json");
    fs::write(&settings, r#"{"permissions": {"allow": ["Bash"]}}"#).unwrap();
    let store = PolicyStore::new(Some(dir.clone()));
    for path in [settings.display().to_string(), "settings.json".into(), "/etc/passwd".into()] {
        let text = format!("approvers:\n  - name: claude_permissions\n    tools: '*'\n    settings: {path}\n");
        let Err(PolicyLookupError::Invalid(message)) = store.resolve(Some(&inline(&text)), Kind::Approval) else {
            panic!("an inline policy naming {path} compiled")
        };
        assert!(message.contains("a policy sent inline cannot name files"), "{message}");
        assert!(!message.contains("root:") && !message.contains("Bash"), "{message}");
    }
    // The same document kept in the worker's policy directory reads the file beside it.
    let named_text = "approvers:\n  - name: claude_permissions\n    tools: '*'\n    settings: settings.json\n";
    fs::write(dir.join("claude.yaml"), named_text).unwrap();
    let policy = store.resolve(Some(&named("claude")), Kind::Approval).unwrap();
    assert_eq!(policy.steps()[0].step.to_string(), "claude_permissions (0 deny, 0 ask, 1 allow)");
    fs::write(dir.join("missing.yaml"), named_text.replace("settings.json", "absent.json")).unwrap();
    let Err(PolicyLookupError::Invalid(message)) = store.resolve(Some(&named("missing")), Kind::Approval) else {
        panic!("a policy naming a missing settings file compiled")
    };
    assert!(!message.contains(&dir.display().to_string()), "the worker's directory shows: {message}");
    fs::remove_dir_all(dir).unwrap();
}
