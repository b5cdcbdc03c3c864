use super::*;

#[test]
fn no_attempt_is_scheduled_past_the_retry_period() {
    let retry = RetryPolicy { period: Duration::from_secs(60), ..RetryPolicy::default() };
    let first = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let next = retry.next_attempt(first, 1, first + Duration::from_secs(10)).unwrap();
    assert!(next >= first + Duration::from_millis(10_500) && next <= first + Duration::from_secs(11), "{next:?}");
    assert_eq!(retry.next_attempt(first, 1, first + Duration::from_millis(59_600)), None);
}

#[test]
fn signs_as_the_standard_webhooks_reference_does() {
    // The reference libraries' own test vector (standard-webhooks, libraries/*/tests).
    let secret: WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
    let body = br#"{"test": 2432232314}"#;
    let signature = secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
    assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
}

#[test]
fn a_secret_reads_back_from_its_text_and_bad_ones_are_refused() {
    let secret = WebhookSecret::generate();
    let text = secret.to_string();
    assert!(text.starts_with(SECRET_PREFIX));
    assert_eq!(text.parse::<WebhookSecret>().unwrap(), secret);
    assert!(format!("{secret:?}").find(&text[6..]).is_none(), "Debug hides the key");
    assert!(matches!("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse::<WebhookSecret>(), Err(SecretError::Prefix)));
    assert!(matches!("whsec_!!".parse::<WebhookSecret>(), Err(SecretError::Base64(_))));
    assert!(matches!("whsec_c2hvcnQ=".parse::<WebhookSecret>(), Err(SecretError::Length(5))));
}

#[test]
fn delays_double_within_their_cap_and_jitter_in_their_upper_half() {
    let retry = RetryPolicy {
        first_delay: Duration::from_secs(1),
        max_delay: Duration::from_secs(10),
        period: Duration::from_secs(60),
        attempt_timeout: Duration::from_secs(1),
    };
    for (attempt, full) in [(1, 1), (2, 2), (3, 4), (4, 8), (5, 10), (40, 10)] {
        let delay = retry.delay(attempt);
        let full = Duration::from_secs(full);
        assert!(delay >= full / 2 && delay <= full, "attempt {attempt}: {delay:?}");
    }
}

#[test]
fn timestamps_are_rfc3339_utc() {
    assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
    assert_eq!(rfc3339(1_614_265_330, 7), "2021-02-25T15:02:10.007Z");
    assert_eq!(rfc3339(951_782_400, 0), "2000-02-29T00:00:00.000Z");
    assert_eq!(rfc3339_at(1_614_265_330_007), "2021-02-25T15:02:10.007Z");
}
