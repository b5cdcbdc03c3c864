use super::*;

#[test]
fn tokens_are_checked_by_hash() {
    let token = new_token();
    assert_eq!(token.len(), 64);
    let reviewers = Reviewers::from_list(vec![Reviewer {
        name: "alice".into(),
        token_sha256: sha256_hex(&token),
        pools: vec!["ops".into()],
        admin: false,
        overrides: Vec::new(),
    }]);
    assert_eq!(reviewers.authenticate(&token).map(|r| r.name.as_str()), Some("alice"));
    assert!(reviewers.authenticate("nope").is_none());
    assert!(reviewers.authenticate(&token).unwrap().sees("ops"));
    assert!(!reviewers.authenticate(&token).unwrap().sees("security"));
}

#[test]
fn add_token_appends_and_keeps_what_was_there() {
    let dir = std::env::temp_dir().join(format!("airlock-tokens-{}", random_hex::<6>()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokens.yaml");
    std::fs::write(&path, "# reviewers of the security team\n").unwrap();
    let alice = add_token(&path, "alice", &["ops".into(), "security".into()], false, &[]).unwrap();
    let bob = add_token(&path, "bob", &["*".into()], true, &["ops".into()]).unwrap();
    assert_ne!(alice, bob);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("# reviewers of the security team\n"), "{text}");
    assert!(!text.contains(&alice), "the token itself is never stored");
    let reviewers = Reviewers::load(&path).unwrap();
    assert_eq!(reviewers.len(), 2);
    assert_eq!(reviewers.authenticate(&alice).unwrap().pools, ["ops", "security"]);
    assert!(reviewers.authenticate(&bob).unwrap().sees("anything"));
    assert!(reviewers.authenticate(&bob).unwrap().admin && !reviewers.authenticate(&alice).unwrap().admin);
    assert!(text.contains("  admin: true\n") && text.matches("admin").count() == 1, "{text}");
    // The override is bob's in `ops` only, and nobody's who does not see the pool.
    let (alice, bob) = (reviewers.authenticate(&alice).unwrap(), reviewers.authenticate(&bob).unwrap());
    assert!(text.contains("  override: [\"ops\"]\n"), "{text}");
    assert!(bob.overrides("ops") && !bob.overrides("security") && !alice.overrides("ops"));
    let everywhere = Reviewer { overrides: vec!["*".into()], pools: vec!["ops".into()], ..alice.clone() };
    assert!(everywhere.overrides("ops") && !everywhere.overrides("security"));
    assert!(matches!(add_token(&path, "alice", &["ops".into()], false, &[]), Err(AuthError::Invalid { .. })));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_files_say_where() {
    let err = Reviewers::parse("- name: a\n  token_sha256: 12\n  pools: [x]\n", "t.yaml").unwrap_err();
    assert!(err.to_string().contains("64 hex digits"), "{err}");
    let err = Reviewers::parse("- name: a\n  pools: [x]\n  extra: 1\n", "t.yaml").unwrap_err();
    assert!(err.to_string().starts_with("t.yaml:"), "{err}");
}

#[test]
fn cookies_and_origins() {
    assert_eq!(cookie("a=1; airlock_session=xyz; b=2", SESSION_COOKIE), Some("xyz"));
    assert_eq!(cookie("a=1", SESSION_COOKIE), None);
    assert!(same_origin("http://127.0.0.1:8080", "127.0.0.1:8080"));
    assert!(!same_origin("http://evil.example", "127.0.0.1:8080"));
    assert!(!same_origin("null", "127.0.0.1:8080"));
    for other_scheme in ["https://127.0.0.1:8080", "ws://127.0.0.1:8080", "file://127.0.0.1:8080"] {
        assert!(!same_origin(other_scheme, "127.0.0.1:8080"), "{other_scheme}");
    }
}

#[test]
fn failed_sign_ins_are_limited_per_client_for_a_window() {
    let limit = LoginLimit { failures: 3, window: Duration::from_secs(60) };
    let limiter = LoginLimiter::new(limit);
    let start = Instant::now();
    let one: IpAddr = "192.0.2.1".parse().unwrap();
    let other: IpAddr = "192.0.2.2".parse().unwrap();
    for _ in 0..3 {
        assert_eq!(limiter.check(one, start), Ok(()));
        limiter.failed(one, start);
    }
    assert_eq!(limiter.check(one, start + Duration::from_secs(20)), Err(Duration::from_secs(40)));
    assert_eq!(limiter.check(other, start), Ok(()), "another address is not held back");
    // The same host over IPv4-mapped IPv6 is the same client.
    assert!(limiter.check("::ffff:192.0.2.1".parse().unwrap(), start).is_err());
    assert_eq!(limiter.check(one, start + limit.window), Ok(()), "the window passed");
    limiter.failed(one, start + limit.window);
    assert_eq!(limiter.check(one, start + limit.window), Ok(()), "a new window counts from one");

    // An IPv6 /64 is one client; success forgets only the address that signed in.
    let v6 = |s: &str| s.parse::<IpAddr>().unwrap();
    for _ in 0..3 {
        limiter.failed(v6("2001:db8:0:1::1"), start);
        limiter.failed(other, start);
    }
    assert!(limiter.check(v6("2001:db8:0:1::ffff"), start).is_err());
    assert_eq!(limiter.check(v6("2001:db8:0:2::1"), start), Ok(()));
    limiter.succeeded(v6("2001:db8:0:1::2"));
    assert_eq!(limiter.check(v6("2001:db8:0:1::1"), start), Ok(()));
    assert!(limiter.check(other, start).is_err());
}

#[test]
fn the_limiter_remembers_a_bounded_number_of_addresses() {
    let limiter = LoginLimiter::default();
    let start = Instant::now();
    let addr = |n: usize| IpAddr::from(std::net::Ipv4Addr::from_bits(0x0a00_0000 + n as u32));
    for n in 0..LOGIN_TRACKED {
        limiter.failed(addr(n), start);
    }
    // Full: past windows go first, else the oldest.
    limiter.failed(addr(LOGIN_TRACKED), start + Duration::from_secs(1));
    assert_eq!(limiter.map.lock().unwrap().len(), LOGIN_TRACKED);
    let later = start + LOGIN_WINDOW + Duration::from_millis(500);
    limiter.failed(addr(LOGIN_TRACKED + 1), later);
    assert_eq!(limiter.map.lock().unwrap().len(), 2, "expired windows were dropped");
}

#[tokio::test]
async fn sessions_end_at_logout_and_at_expiry() {
    let store = crate::fixtures::memory_store().await;
    let alice = Reviewer {
        name: "alice".into(),
        token_sha256: sha256_hex("t"),
        pools: vec!["ops".into()],
        admin: false,
        overrides: Vec::new(),
    };
    let sessions = Sessions::new(store.clone(), Duration::from_millis(50));
    let expiring = sessions.open(&alice).await.unwrap();
    let end = sessions.get(&expiring).await.unwrap().unwrap().end;
    tokio::time::timeout(Duration::from_secs(5), end.wait()).await.expect("the session expired");
    assert!(end.is_over() && sessions.get(&expiring).await.unwrap().is_none());

    let sessions = Sessions::new(store.clone(), SESSION_TTL);
    let id = sessions.open(&alice).await.unwrap();
    let end = sessions.get(&id).await.unwrap().unwrap().end;
    assert!(!end.is_over());
    // Another process on the same store knows the session.
    let elsewhere = Sessions::new(store, SESSION_TTL);
    assert_eq!(elsewhere.get(&id).await.unwrap().unwrap().reviewer, "alice");
    sessions.close(&id).await.unwrap();
    tokio::time::timeout(Duration::from_secs(1), end.wait()).await.expect("logout ended it");
    assert!(sessions.get(&id).await.unwrap().is_none());
    assert!(elsewhere.get(&id).await.unwrap().is_none(), "logged out everywhere");
}
