use super::*;

fn items(pairs: &[(f64, bool)]) -> Vec<Labelled> {
    pairs.iter().map(|&(score, positive)| Labelled { score, positive }).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn the_curve_steps_through_each_distinct_score_from_the_highest() {
    // scikit-learn's own example: roc_curve([1, 1, 2, 2], [0.1, 0.4, 0.35, 0.8], pos_label=2).
    let points = curve(&items(&[(0.1, false), (0.4, false), (0.35, true), (0.8, true)]));
    let got: Vec<(f64, f64, f64)> = points.iter().map(|p| (p.threshold, p.fpr, p.tpr)).collect();
    assert_eq!(got, [(f64::INFINITY, 0.0, 0.0), (0.8, 0.0, 0.5), (0.4, 0.5, 0.5), (0.35, 0.5, 1.0), (0.1, 1.0, 1.0)]);
    assert_eq!(auroc(&points), Some(0.75));
    let within = |fpr| at_fpr(&points, fpr).map(|p| (p.threshold, p.tpr));
    assert_eq!((within(0.0), within(0.49), within(0.5)), (Some((0.8, 0.5)), Some((0.8, 0.5)), Some((0.35, 1.0))));
    // One class only: no curve.
    assert!(curve(&items(&[(1.0, true), (2.0, true)])).is_empty());
    assert_eq!(report(&items(&[(1.0, false)]), Some(0.1), Bootstrap { resamples: 10, seed: 1 }), None);
}

#[test]
fn ties_between_classes_count_one_half_and_the_logit_fit_goes_through_the_inner_points() {
    // Positives 9, 9, 8, 1 and negatives 9, 8, 1, 1: the curve passes (1/4, 1/2) and (1/2, 3/4),
    // on the line logit TPR = ln 3 + logit FPR.
    let labelled = items(&[
        (9.0, true),
        (9.0, true),
        (8.0, true),
        (1.0, true),
        (9.0, false),
        (8.0, false),
        (1.0, false),
        (1.0, false),
    ]);
    let points = curve(&labelled);
    assert_eq!(points.len(), 4);
    assert!(close(auroc(&points).unwrap(), 10.5 / 16.0));
    let fit = LogitFit::of(&points).unwrap();
    assert!(close(fit.intercept, 3f64.ln()) && close(fit.slope, 1.0) && fit.points == 2, "{fit:?}");
    assert!(close(fit.tpr_at(0.1), 0.25));
    // Flagging the 9s flags a quarter of the negatives: a budget of 10% allows nothing.
    let report = report(&labelled, Some(0.1), Bootstrap { resamples: 0, seed: 0 }).unwrap();
    let at = report.at_fpr.unwrap();
    assert_eq!((at.tpr, at.threshold, at.achieved_fpr), (0.0, None, 0.0));
    assert!(close(at.fitted_tpr.unwrap(), 0.25));
    assert_eq!((report.n, report.positives, report.negatives, report.auroc_ci), (8, 4, 4, None));
}

#[test]
fn bootstrap_intervals_are_seeded_and_hold_the_estimate() {
    let mut rng = Seeded::new(7);
    // Positives score a point higher on average.
    let labelled: Vec<Labelled> = (0..400)
        .map(|i| {
            let positive = i % 2 == 0;
            let score = (rng.unit() * 8.0 + if positive { 2.0 } else { 0.0 }).min(10.0);
            Labelled { score, positive }
        })
        .collect();
    let bootstrap = Bootstrap { resamples: 300, seed: 3 };
    let first = report(&labelled, Some(0.05), bootstrap).unwrap();
    assert_eq!(first, report(&labelled, Some(0.05), bootstrap).unwrap());
    let ci = first.auroc_ci.unwrap();
    assert!(ci.low < first.auroc && first.auroc < ci.high && ci.high - ci.low < 0.2, "{first:?}");
    let at = first.at_fpr.as_ref().unwrap();
    let (tpr, fitted) = (at.tpr_ci.unwrap(), at.fitted_tpr_ci.unwrap());
    assert!(tpr.low <= at.tpr && at.tpr <= tpr.high, "{at:?}");
    assert!(fitted.low <= at.fitted_tpr.unwrap() && at.fitted_tpr.unwrap() <= fitted.high, "{at:?}");
    let other = report(&labelled, Some(0.05), Bootstrap { resamples: 300, seed: 4 }).unwrap();
    assert_ne!(other.auroc_ci, first.auroc_ci);
}

#[test]
fn percentiles_interpolate_as_numpy_does() {
    let sorted = [1.0, 2.0, 3.0, 4.0];
    assert!(close(percentile(&sorted, 2.5).unwrap(), 1.075));
    assert!(close(percentile(&sorted, 97.5).unwrap(), 3.925));
    assert_eq!((percentile(&sorted, 0.0), percentile(&sorted, 100.0)), (Some(1.0), Some(4.0)));
    assert_eq!((percentile(&[5.0], 50.0), percentile(&[], 50.0)), (Some(5.0), None));
}

#[test]
fn the_generator_is_splitmix64() {
    // The first output of SplitMix64 from seed 0, as its reference implementation gives it.
    assert_eq!(Seeded::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    let mut rng = Seeded::new(1);
    assert!((0..1000).all(|_| rng.below(3) < 3 && (0.0..1.0).contains(&rng.unit())));
}
