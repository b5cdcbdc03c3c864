use super::*;

#[test]
fn step_names_never_carry_a_routing_word_or_a_wildcard() {
    for good in ["monitor", "deny_words", "my-agent", "demo/append_timeout", "A1"] {
        assert_eq!(check_step_name(good), Ok(()), "{good}");
    }
    for bad in ["#", "*", "a.b", "a.#", "human.*", "", "/a", "a/", "a//b", "a b", "é", "a\0b", "step\n"] {
        assert!(check_step_name(bad).is_err(), "{bad:?} was taken");
    }
    assert!(check_step_name(&"a".repeat(MAX_NAME_CHARS)).is_ok());
    assert!(check_step_name(&"a".repeat(MAX_NAME_CHARS + 1)).is_err());
}

#[test]
fn pool_names_are_one_word() {
    assert_eq!(check_pool_name("ops-team_2"), Ok(()));
    for bad in ["a/b", "#", "*", "a.b", ""] {
        assert!(check_pool_name(bad).is_err(), "{bad:?} was taken");
    }
}

#[test]
fn timeouts_are_finite_positive_and_bounded() {
    assert_eq!(step_timeout(1.5), Ok(Duration::from_millis(1500)));
    assert_eq!(step_timeout(MAX_STEP_TIMEOUT.as_secs() as f64), Ok(MAX_STEP_TIMEOUT));
    for bad in [0.0, -1.0, 1e20, f64::MAX, f64::INFINITY, f64::NAN, MAX_STEP_TIMEOUT.as_secs() as f64 + 1.0] {
        assert!(step_timeout(bad).is_err(), "{bad} was taken");
    }
}

#[test]
fn globs_and_texts_are_bounded() {
    assert!(check_glob_length(&"?".repeat(MAX_GLOB_CHARS)).is_ok());
    assert!(check_glob_length(&"é".repeat(MAX_GLOB_CHARS + 1)).is_err());
    assert!(check_text("tab\tand newline\n").is_ok());
    assert!(check_text("nul\0").is_err());
}

#[test]
fn a_model_explanation_says_something_within_bounds() {
    assert_eq!(check_model_explanation("This action was not approved."), Ok(()));
    assert!(check_model_explanation(&"é".repeat(MAX_MODEL_EXPLANATION_CHARS)).is_ok());
    for bad in ["", "   ", "\n\t"] {
        assert!(check_model_explanation(bad).unwrap_err().contains("must say something"), "{bad:?} was taken");
    }
    let long = check_model_explanation(&"a".repeat(MAX_MODEL_EXPLANATION_CHARS + 1)).unwrap_err();
    assert!(long.contains("more than the 4000 allowed"), "{long}");
}
