use reqwest::dns::Resolve as _;

use super::*;

fn url(text: &str) -> reqwest::Url {
    text.parse().unwrap()
}

#[test]
fn every_range_the_issue_names_is_refused_and_public_addresses_are_not() {
    let cases: [(&str, Option<Range>); 26] = [
        ("127.0.0.1", Some(Range::Loopback)),
        ("127.255.0.9", Some(Range::Loopback)),
        ("::1", Some(Range::Loopback)),
        ("0.0.0.0", Some(Range::Unspecified)),
        ("0.1.2.3", Some(Range::Unspecified)),
        ("::", Some(Range::Unspecified)),
        ("169.254.0.1", Some(Range::LinkLocal)),
        ("fe80::1", Some(Range::LinkLocal)),
        ("febf::1", Some(Range::LinkLocal)),
        ("10.1.2.3", Some(Range::Private)),
        ("172.16.0.1", Some(Range::Private)),
        ("172.31.255.255", Some(Range::Private)),
        ("192.168.1.1", Some(Range::Private)),
        ("fc00::1", Some(Range::Private)),
        ("fdff::1", Some(Range::Private)),
        ("169.254.169.254", Some(Range::Metadata)),
        ("fd00:ec2::254", Some(Range::Metadata)),
        ("100.64.0.1", Some(Range::Shared)),
        ("224.0.0.1", Some(Range::Multicast)),
        ("::ffff:127.0.0.1", Some(Range::Loopback)),
        ("::ffff:169.254.169.254", Some(Range::Metadata)),
        ("64:ff9b::a00:1", Some(Range::Private)),
        ("172.32.0.1", None),
        ("100.128.0.1", None),
        ("93.184.215.14", None),
        ("2606:4700::1111", None),
    ];
    for (address, range) in cases {
        assert_eq!(range_of(address.parse().unwrap()), range, "{address}");
    }
}

#[tokio::test]
async fn literal_hosts_are_checked_as_written_and_as_the_parser_normalises_them() {
    for refused in [
        "http://127.0.0.1:8080/hook",
        "http://[::1]/hook",
        "https://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://0x7f.1/hook",
        "http://2130706433/hook",
        "http://[::ffff:10.0.0.1]/",
    ] {
        let error = check(&url(refused)).await.expect_err(refused);
        assert!(matches!(error, Refused::Address { .. }), "{refused}: {error}");
        assert!(check_literal(&url(refused)).is_err(), "{refused}");
    }
    check(&url("https://93.184.215.14/hook")).await.expect("a public address");
    check_literal(&url("https://hooks.example.invalid/")).expect("names are the resolver's");
}

#[tokio::test]
async fn names_are_refused_for_metadata_for_any_private_address_and_when_they_do_not_resolve() {
    for metadata in ["http://metadata.google.internal/computeMetadata/v1/", "http://METADATA.google.internal./"] {
        assert!(matches!(check(&url(metadata)).await, Err(Refused::Metadata(_))), "{metadata}");
    }
    let error = check(&url("http://localhost:9/hook")).await.unwrap_err();
    assert!(
        matches!(error, Refused::Address { range: Range::Loopback, .. }),
        "localhost resolves to loopback: {error}"
    );
    assert!(error.to_string().contains("localhost"), "{error}");
    let error = check(&url("http://nothing.invalid/hook")).await.unwrap_err();
    assert!(matches!(error, Refused::Unresolved { .. }), "{error}");
}

#[tokio::test]
async fn the_send_time_resolver_refuses_a_name_that_now_resolves_to_loopback() {
    let refused = PublicOnly.resolve("localhost".parse().unwrap()).await;
    let error = refused.err().expect("refused").to_string();
    assert!(error.contains("loopback"), "{error}");
}
