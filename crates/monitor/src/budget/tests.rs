use std::collections::VecDeque;

use super::*;
use crate::calibrate::roc::Seeded;
use airlock_telemetry::metrics::Metrics;

const CALLS: usize = 2_000;
const B: f64 = 0.05;

/// Scores spread evenly over 0–10, to two decimals as a model might write them.
fn uniform_scores(seed: u64) -> Vec<f64> {
    let mut rng = Seeded::new(seed);
    (0..CALLS).map(|_| (rng.unit() * 1000.0).floor() / 100.0).collect()
}

/// A monitor process: its budget, and the reports of the other's decisions still on their way.
struct Decider {
    budget: Budget,
    inbox: VecDeque<(usize, f64, bool)>,
}

/// Which calls were passed on when `scores` are decided by two processes taking calls at
/// random, each hearing of the other's decisions `lag` calls late.
fn two_deciders(scores: &[f64], lag: usize, seed: u64) -> Vec<bool> {
    let mut rng = Seeded::new(seed);
    let mut deciders = [(); 2].map(|()| Decider { budget: Budget::new(B), inbox: VecDeque::new() });
    let mut passed = Vec::with_capacity(scores.len());
    for (call, &score) in scores.iter().enumerate() {
        for decider in &mut deciders {
            while decider.inbox.front().is_some_and(|(due, _, _)| *due <= call) {
                let (_, score, passed) = decider.inbox.pop_front().unwrap();
                decider.budget.record(score, passed);
            }
        }
        let me = rng.below(2);
        let decision = deciders[me].budget.decide(Mode::Paced, score);
        deciders[1 - me].inbox.push_back((call + lag, score, decision));
        passed.push(decision);
    }
    passed
}

/// The score that a share `q` of `scores` are at or below.
fn quantile(scores: &[f64], q: f64) -> f64 {
    let mut sorted = scores.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((q * sorted.len() as f64).ceil() as usize).saturating_sub(1)]
}

#[test]
fn two_lagging_deciders_pass_on_the_budget_s_share_of_the_highest_scores_without_a_burst() {
    // Twenty runs of each lag; the reports of one decider reach the other 1 or 25 calls late.
    let (mut runs, mut below_top_tenth) = (0, 0);
    for lag in [1, 25] {
        for seed in 1..=20 {
            let scores = uniform_scores(seed);
            let passed = two_deciders(&scores, lag, seed + 100);
            let count = passed.iter().filter(|p| **p).count();
            assert!((80..=120).contains(&count), "seed {seed}, lag {lag}: {count} of {CALLS} passed on");
            for (tenth, chunk) in passed.chunks(CALLS / 10).enumerate() {
                let share = chunk.iter().filter(|p| **p).count() as f64 / chunk.len() as f64;
                assert!(share <= 0.075, "seed {seed}, lag {lag}: tenth {tenth} passed on {share}");
            }
            let on = |from: f64| scores.iter().zip(&passed).filter(move |(s, p)| **p && **s >= from).count();
            // Every call passed on is in the top 15%, nearly all in the top 10%, and most of
            // the top 5% are passed on.
            assert_eq!(on(quantile(&scores, 0.85)), count, "seed {seed}, lag {lag}");
            below_top_tenth += count - on(quantile(&scores, 0.9));
            let top = quantile(&scores, 0.95);
            let top_calls = scores.iter().filter(|s| **s >= top).count();
            assert!(on(top) * 3 >= top_calls * 2, "seed {seed}, lag {lag}: {} of the {top_calls} top calls", on(top));
            runs += 1;
        }
    }
    assert!(below_top_tenth <= 3, "{below_top_tenth} calls below the top tenth passed on in {runs} runs");
}

#[test]
fn before_the_warmup_only_the_top_of_the_scale_is_passed_on_and_never_more_than_the_allowance() {
    let mut budget = Budget::new(B);
    // 39 calls (warmup at 5% is 40): a 9.4 is not passed on, a 9.6 is, the fourth 9.9 is not.
    let early: Vec<bool> = [5.0, 9.4, 9.6, 9.9, 9.9, 9.9, 1.0].iter().map(|s| budget.decide(Mode::Paced, *s)).collect();
    assert_eq!(early, [false, false, true, true, true, false, false]);
    let state = budget.state(Mode::Paced);
    assert_eq!((state.seen, state.passed, state.threshold), (7, 3, 9.9));
    assert!((state.left - (0.35 - 3.0)).abs() < 1e-9, "{state:?}");
    // Low scores only: the threshold stays at the even spread's 9.5 until the warmup ends.
    let mut quiet = Budget::new(B);
    for _ in 0..39 {
        assert!(!quiet.decide(Mode::Paced, 2.0));
    }
    assert_eq!(quiet.state(Mode::Paced).threshold, 9.5);
    quiet.record(2.0, false);
    assert_eq!(quiet.state(Mode::Paced).threshold, 2.0);
}

#[test]
fn tied_scores_are_passed_on_first_come_within_the_credit() {
    // Whole-number scores where a fifth of the calls are 8s: the quantile is 8, and the
    // credit holds the share at 5% rather than 20%.
    let mut budget = Budget::new(B);
    let passed = (0..1000).filter(|i| budget.decide(Mode::Paced, if i % 5 == 0 { 8.0 } else { 2.0 })).count();
    assert!((48..=53).contains(&passed), "{passed}");
    assert_eq!(budget.state(Mode::Paced).threshold, 8.0);
}

#[test]
fn a_calibrated_budget_passes_on_what_is_above_its_threshold_and_measures() {
    let mut budget = Budget::new(0.1);
    let mode = Mode::Calibrated { threshold: 6.31 };
    let passed: Vec<bool> = [6.31, 6.32, 9.0, 9.0, 9.0, 0.0].iter().map(|s| budget.decide(mode, *s)).collect();
    assert_eq!(passed, [false, true, true, true, true, false]);
    let state = budget.state(mode);
    assert_eq!((state.seen, state.passed, state.threshold), (6, 4, 6.31));
    assert!((state.share - 4.0 / 6.0).abs() < 1e-12 && (state.left - (0.6 - 4.0)).abs() < 1e-9, "{state:?}");
}

#[test]
fn the_same_scores_in_the_same_order_give_the_same_decisions() {
    let scores = uniform_scores(9);
    assert_eq!(two_deciders(&scores, 10, 5), two_deciders(&scores, 10, 5));
    // Reports count like the budget's own scores: a budget fed everything agrees with one
    // that decided everything.
    let mut decided = Budget::new(B);
    let mut fed = Budget::new(B);
    for score in &scores {
        let passed = decided.decide(Mode::Paced, *score);
        fed.record(*score, passed);
    }
    assert_eq!(decided, fed);
    assert_eq!(hundredths(0.29), 29);
    assert_eq!((hundredths(-1.0), hundredths(10.5)), (0, 1000));
}

#[test]
fn budgets_are_kept_per_step_and_scope_fed_by_the_fleet_and_shown_as_gauges() {
    let metrics = Arc::new(Metrics::new());
    let (outbox, mut sent) = tokio::sync::mpsc::unbounded_channel();
    let budgets = Budgets::new(metrics.clone()).with_outbox(outbox);
    // Another process's scores of run r1 arrive first: counted, but no gauges yet.
    for score in [1.0, 2.0, 9.9] {
        budgets.record(&Entry {
            step: "monitor".into(),
            scope: "r1".into(),
            audit_budget: 0.1,
            score,
            passed: score > 9.0,
        });
    }
    assert_eq!(budgets.state("monitor", "r1"), None);
    assert!(!metrics.render().contains("airlock_budget_share{"));
    let mode = Mode::Calibrated { threshold: 5.0 };
    let (passed, state) = budgets.decide("monitor", "r1", 0.1, mode, 7.0);
    assert!(passed);
    assert_eq!((state.seen, state.passed, state.threshold), (4, 2, 5.0));
    assert_eq!(budgets.state("monitor", "r1"), Some(state));
    let ended = budgets.ended("monitor", "r1", 0.1, mode, 10.0);
    assert_eq!((ended.seen, ended.passed), (5, 2));
    // Another run, and another step, have budgets of their own.
    let (_, other) = budgets.decide("monitor", "r2", 0.1, mode, 7.0);
    let (_, step) = budgets.decide("judge", STEP_SCOPE, 0.1, mode, 1.0);
    assert_eq!((other.seen, step.seen, step.passed), (1, 1, 0));
    let exposition = metrics.render();
    for line in [
        r#"airlock_budget_share{step="monitor",run="r1"} 0.4"#,
        r#"airlock_budget_threshold{step="monitor",run="r1"} 5.0"#,
        r#"airlock_budget_left{step="monitor",run="r1"} -1.5"#,
        r#"airlock_budget_share{step="judge",run="*"} 0.0"#,
    ] {
        assert!(exposition.lines().any(|l| l == line), "{line} in:\n{exposition}");
    }
    // What this process decided went to the outbox; what others sent did not.
    let mut entries = Vec::new();
    while let Ok(entry) = sent.try_recv() {
        entries.push((entry.step, entry.scope, entry.score, entry.passed));
    }
    assert_eq!(
        entries,
        [
            ("monitor".into(), "r1".into(), 7.0, true),
            ("monitor".into(), "r1".into(), 10.0, false),
            ("monitor".into(), "r2".into(), 7.0, true),
            ("judge".into(), "*".into(), 1.0, false),
        ]
    );
}

#[test]
fn past_the_most_budgets_the_one_used_longest_ago_is_forgotten_with_its_gauges() {
    let metrics = Arc::new(Metrics::new());
    let budgets = Budgets::new(metrics.clone());
    let mode = Mode::Calibrated { threshold: 5.0 };
    for run in 0..MAX_BUDGETS {
        budgets.decide("monitor", &run.to_string(), 0.1, mode, 1.0);
    }
    // Run 0 is used again, so run 1 is the one used longest ago when one more comes.
    budgets.decide("monitor", "0", 0.1, mode, 1.0);
    budgets.decide("monitor", "new", 0.1, mode, 1.0);
    assert_eq!(budgets.state("monitor", "1"), None);
    assert_eq!(budgets.state("monitor", "0").map(|s| s.seen), Some(2));
    let exposition = metrics.render();
    assert!(!exposition.contains(r#"run="1"}"#) && exposition.contains(r#"run="new"}"#));
}
