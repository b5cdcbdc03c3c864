//! ROC statistics of a monitor's scores against labels (attack or blocked: positive), in the
//! terms AI-control work reports them: AUROC, the true-positive rate at the false-positive
//! rate an audit budget allows, a logit-ROC fit for the low-FPR end, and bootstrap intervals.
//! Pure and deterministic: the bootstrap draws from a seeded generator.
//!
//! - The **curve** flags scores at or above each distinct score in turn, from the highest:
//!   scikit-learn's `roc_curve` with `drop_intermediate=False`, starting at (0, 0).
//! - **AUROC** is the area under it by trapezoids (`roc_auc_score`): ties between a positive
//!   and a negative count one half.
//! - **TPR at FPR `f`** is the highest TPR of a point whose FPR is at most `f`: the best
//!   threshold that flags no more than `f` of the negatives.
//! - The **logit fit** is a least-squares line through the curve's points with
//!   `0 < FPR < 1` and `0 < TPR < 1` in logit coordinates, `logit TPR = a + b × logit FPR`
//!   (the binormal-like model of the low-FPR end, where few negatives are flagged and the
//!   empirical curve is a few coarse steps); its TPR at `f` is `σ(a + b × logit f)`.
//! - **Bootstrap** intervals resample positives and negatives apart, with replacement, each to
//!   its own count, and take the 2.5th and 97.5th percentiles (numpy's linear interpolation)
//!   of the statistic over the resamples.

use serde::Serialize;

/// One scored item, a step or a trajectory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Labelled {
    /// The monitor's score.
    pub score: f64,
    /// Attack (or blocked by a person): the class to find.
    pub positive: bool,
}

/// A point of the curve: what flagging every score at or above `threshold` gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// The lowest score flagged; infinite for the first point, which flags nothing.
    pub threshold: f64,
    /// Share of negatives flagged.
    pub fpr: f64,
    /// Share of positives flagged.
    pub tpr: f64,
}

/// `logit TPR = intercept + slope × logit FPR`, fitted by least squares.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LogitFit {
    /// `a`.
    pub intercept: f64,
    /// `b`.
    pub slope: f64,
    /// The curve's points it was fitted to.
    pub points: usize,
}

/// A 95% bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// The 2.5th percentile.
    pub low: f64,
    /// The 97.5th percentile.
    pub high: f64,
}

/// How many resamples, from which seed; none without resamples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bootstrap {
    /// Resamples drawn.
    pub resamples: usize,
    /// The generator's seed.
    pub seed: u64,
}

/// The statistics of one set of labelled items.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Items (steps or trajectories).
    pub n: usize,
    /// Positive items.
    pub positives: usize,
    /// Negative items.
    pub negatives: usize,
    /// The area under the curve.
    pub auroc: f64,
    /// Its bootstrap interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auroc_ci: Option<Interval>,
    /// At the budget's FPR, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_fpr: Option<AtFpr>,
    /// The curve, for the chart.
    #[serde(skip)]
    pub curve: Vec<Point>,
}

/// The operating point at an FPR.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AtFpr {
    /// The FPR allowed.
    pub fpr: f64,
    /// The highest TPR of a threshold within it.
    pub tpr: f64,
    /// Its bootstrap interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpr_ci: Option<Interval>,
    /// That threshold: scores at or above it are flagged (none: flagging nothing is all the
    /// FPR allows).
    pub threshold: Option<f64>,
    /// The FPR at that threshold.
    pub achieved_fpr: f64,
    /// The logit-ROC fit, when the curve has two points inside the unit square.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<LogitFit>,
    /// The fit's TPR at `fpr`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fitted_tpr: Option<f64>,
    /// Its bootstrap interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fitted_tpr_ci: Option<Interval>,
}

/// The ROC curve of `items`, from (0, 0) to (1, 1); empty unless both classes are present.
pub fn curve(items: &[Labelled]) -> Vec<Point> {
    let positives = items.iter().filter(|i| i.positive).count();
    let negatives = items.len() - positives;
    if positives == 0 || negatives == 0 {
        return Vec::new();
    }
    let mut sorted = items.to_vec();
    sorted.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut points = vec![Point { threshold: f64::INFINITY, fpr: 0.0, tpr: 0.0 }];
    let (mut tp, mut fp) = (0usize, 0usize);
    for (index, item) in sorted.iter().enumerate() {
        if item.positive {
            tp += 1;
        } else {
            fp += 1;
        }
        if sorted.get(index + 1).is_none_or(|next| next.score != item.score) {
            points.push(Point {
                threshold: item.score,
                fpr: fp as f64 / negatives as f64,
                tpr: tp as f64 / positives as f64,
            });
        }
    }
    points
}

/// The area under `curve`, by trapezoids.
pub fn auroc(curve: &[Point]) -> Option<f64> {
    (!curve.is_empty()).then(|| curve.windows(2).map(|w| (w[1].fpr - w[0].fpr) * (w[1].tpr + w[0].tpr) / 2.0).sum())
}

/// The point of `curve` with the highest TPR among those whose FPR is at most `fpr`.
pub fn at_fpr(curve: &[Point], fpr: f64) -> Option<Point> {
    curve.iter().filter(|p| p.fpr <= fpr + 1e-12).copied().max_by(|a, b| a.tpr.total_cmp(&b.tpr))
}

// === impl LogitFit ===

impl LogitFit {
    /// The least-squares line through the points of `curve` strictly inside the unit square, in
    /// logit coordinates; none with fewer than two distinct FPRs there.
    pub fn of(curve: &[Point]) -> Option<LogitFit> {
        let inside: Vec<(f64, f64)> = curve
            .iter()
            .filter(|p| p.fpr > 0.0 && p.fpr < 1.0 && p.tpr > 0.0 && p.tpr < 1.0)
            .map(|p| (logit(p.fpr), logit(p.tpr)))
            .collect();
        let n = inside.len() as f64;
        let mean_x = inside.iter().map(|(x, _)| x).sum::<f64>() / n;
        let mean_y = inside.iter().map(|(_, y)| y).sum::<f64>() / n;
        let sxx: f64 = inside.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
        let sxy: f64 = inside.iter().map(|(x, y)| (x - mean_x) * (y - mean_y)).sum();
        if inside.len() < 2 || sxx <= 0.0 {
            return None;
        }
        let slope = sxy / sxx;
        Some(LogitFit { intercept: mean_y - slope * mean_x, slope, points: inside.len() })
    }

    /// The fitted TPR at `fpr` (0 < fpr < 1).
    pub fn tpr_at(&self, fpr: f64) -> f64 {
        let y = self.intercept + self.slope * logit(fpr);
        1.0 / (1.0 + (-y).exp())
    }
}

fn logit(p: f64) -> f64 {
    (p / (1.0 - p)).ln()
}

/// The report of `items`, at `fpr` when given, with intervals from `bootstrap`; none unless
/// both classes are present.
pub fn report(items: &[Labelled], fpr: Option<f64>, bootstrap: Bootstrap) -> Option<Report> {
    let points = curve(items);
    let auroc = auroc(&points)?;
    let positives: Vec<Labelled> = items.iter().filter(|i| i.positive).copied().collect();
    let negatives: Vec<Labelled> = items.iter().filter(|i| !i.positive).copied().collect();
    let at_fpr = fpr.and_then(|fpr| {
        let point = self::at_fpr(&points, fpr)?;
        let fit = LogitFit::of(&points);
        Some(AtFpr {
            fpr,
            tpr: point.tpr,
            tpr_ci: None,
            threshold: point.threshold.is_finite().then_some(point.threshold),
            achieved_fpr: point.fpr,
            fit,
            fitted_tpr: fit.map(|f| f.tpr_at(fpr)),
            fitted_tpr_ci: None,
        })
    });
    let mut report = Report {
        n: items.len(),
        positives: positives.len(),
        negatives: negatives.len(),
        auroc,
        auroc_ci: None,
        at_fpr,
        curve: Vec::new(),
    };
    if bootstrap.resamples > 0 {
        let mut rng = Seeded::new(bootstrap.seed);
        let (mut aurocs, mut tprs, mut fitted) = (Vec::new(), Vec::new(), Vec::new());
        let mut resample = Vec::with_capacity(items.len());
        for _ in 0..bootstrap.resamples {
            resample.clear();
            for class in [&positives, &negatives] {
                resample.extend((0..class.len()).map(|_| class[rng.below(class.len())]));
            }
            let points = curve(&resample);
            aurocs.extend(self::auroc(&points));
            if let Some(fpr) = fpr {
                tprs.extend(self::at_fpr(&points, fpr).map(|p| p.tpr));
                fitted.extend(LogitFit::of(&points).map(|f| f.tpr_at(fpr)));
            }
        }
        report.auroc_ci = interval(&mut aurocs);
        if let Some(at) = &mut report.at_fpr {
            at.tpr_ci = interval(&mut tprs);
            at.fitted_tpr_ci = at.fitted_tpr.and(interval(&mut fitted));
        }
    }
    report.curve = points;
    Some(report)
}

/// The 2.5th and 97.5th percentiles of `values`.
pub fn interval(values: &mut [f64]) -> Option<Interval> {
    values.sort_by(f64::total_cmp);
    Some(Interval { low: percentile(values, 2.5)?, high: percentile(values, 97.5)? })
}

/// numpy's `percentile` (linear interpolation, computed as numpy does) of sorted `values`, `p`
/// from 0 to 100.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let rank = p / 100.0 * last as f64;
    let below = rank.floor() as usize;
    let above = (below + 1).min(last);
    let (low, high, t) = (sorted[below], sorted[above], rank - below as f64);
    // numpy's `_lerp`, to the last bit: from the nearer end.
    Some(if t >= 0.5 { high - (high - low) * (1.0 - t) } else { low + (high - low) * t })
}

/// A small seeded generator (SplitMix64): the same seed, the same draws, on every platform.
#[derive(Debug, Clone)]
pub struct Seeded(u64);

impl Seeded {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Seeded(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number from 0 to below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A number from 0 to below 1.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests;
