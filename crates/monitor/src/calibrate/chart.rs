//! The calibration charts, as standalone SVG documents: the table's lines by threshold, and the
//! ROC curves with the budget's FPR and the logit fit.

use std::fmt::Write as _;

use super::roc::{LogitFit, Point};
use super::{Row, ratio};

const W: f64 = 640.0;
const H: f64 = 400.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 160.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// A line of a chart: its name, its colour, its points in the chart's units.
struct Series {
    name: String,
    color: &'static str,
    points: Vec<(f64, f64)>,
    dashed: bool,
}

/// A chart being drawn: x from `x0` to `x1`, y (a share) from 0 to 1.
struct Chart {
    out: String,
    x0: f64,
    span: f64,
}

impl Chart {
    /// The frame: title, horizontal grid with percentages, axes and the x axis's title.
    fn new(title: &str, x0: f64, x1: f64, x_title: &str) -> Self {
        let span = if x1 > x0 { x1 - x0 } else { 1.0 };
        let mut chart = Chart { out: String::new(), x0, span };
        let out = &mut chart.out;
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(out, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            out,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
            W / 2.0,
            escape(title)
        );
        for tick in 0..=4 {
            let share = f64::from(tick) / 4.0;
            let y = y(share);
            let _ = writeln!(
                out,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}%</text>"##,
                W - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                tick * 25,
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{x_title}</text>"#,
            LEFT + (W - LEFT - RIGHT) / 2.0,
            H - 12.0
        );
        let _ = writeln!(
            out,
            r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{b}" stroke="black"/><line x1="{LEFT}" y1="{b}" x2="{r}" y2="{b}" stroke="black"/>"#,
            b = H - BOTTOM,
            r = W - RIGHT
        );
        chart
    }

    fn x(&self, value: f64) -> f64 {
        LEFT + (value - self.x0) / self.span * (W - LEFT - RIGHT)
    }

    /// A label under the x axis at `value`.
    fn x_tick(&mut self, value: f64, label: &str) {
        let x = self.x(value);
        let _ =
            writeln!(self.out, r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"#, H - BOTTOM + 18.0);
    }

    /// The series as lines, each with its entry in the legend.
    fn lines(&mut self, series: &[Series]) {
        for (index, line) in series.iter().enumerate() {
            let dash = if line.dashed { r#" stroke-dasharray="5,4""# } else { "" };
            let color = line.color;
            if !line.points.is_empty() {
                let points: Vec<String> =
                    line.points.iter().map(|&(px, py)| format!("{:.1},{:.1}", self.x(px), y(py))).collect();
                let _ = writeln!(
                    self.out,
                    r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"#,
                    points.join(" ")
                );
            }
            let ly = TOP + 20.0 * index as f64;
            let lx = W - RIGHT + 15.0;
            let _ = writeln!(
                self.out,
                r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
                lx + 20.0,
                lx + 26.0,
                ly + 4.0,
                escape(&line.name)
            );
        }
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

fn y(share: f64) -> f64 {
    TOP + (1.0 - share) * (H - TOP - BOTTOM)
}

/// A line chart of escalation, agreement and the share of blocked calls missed, by
/// threshold, as a standalone SVG document.
pub fn svg(rows: &[Row], title: &str) -> String {
    let (x0, x1) = rows.iter().fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(r.threshold), hi.max(r.threshold)));
    let mut chart = Chart::new(title, x0, x1, "approve_below");
    for row in rows {
        chart.x_tick(row.threshold, &row.threshold.to_string());
    }
    let series = |name: &str, color, value: fn(&Row) -> Option<f64>| Series {
        name: name.to_owned(),
        color,
        points: rows.iter().filter_map(|r| value(r).map(|v| (r.threshold, v))).collect(),
        dashed: false,
    };
    chart.lines(&[
        series("escalated", "#1f77b4", |r| Some(r.escalated)),
        series("agreement", "#2ca02c", |r| r.agreement),
        series("missed (of blocked)", "#d62728", |r| ratio(r.missed, r.blocked)),
    ]);
    chart.finish()
}

/// One ROC curve to draw: its name, its points, and its logit fit.
pub struct Curve<'a> {
    /// `steps` or `trajectories`.
    pub name: &'a str,
    /// The empirical curve.
    pub points: &'a [Point],
    /// The fit, drawn dashed.
    pub fit: Option<LogitFit>,
}

/// The ROC curves (TPR by FPR), their logit fits, the diagonal, and the budget's FPR.
pub fn roc_svg(curves: &[Curve<'_>], budget: Option<f64>, title: &str) -> String {
    let mut chart = Chart::new(title, 0.0, 1.0, "false-positive rate");
    for tick in 0..=4 {
        let share = f64::from(tick) / 4.0;
        chart.x_tick(share, &format!("{}%", tick * 25));
    }
    const COLORS: [&str; 2] = ["#1f77b4", "#ff7f0e"];
    let mut series = Vec::new();
    for (curve, color) in curves.iter().zip(COLORS) {
        series.push(Series {
            name: curve.name.to_owned(),
            color,
            points: curve.points.iter().map(|p| (p.fpr, p.tpr)).collect(),
            dashed: false,
        });
        if let Some(fit) = curve.fit {
            // Dense where the fit bends, at the low-FPR end.
            let points = (1..200).map(|i| (f64::from(i) / 200.0).powi(2)).map(|f| (f, fit.tpr_at(f))).collect();
            series.push(Series { name: format!("{} (logit fit)", curve.name), color, points, dashed: true });
        }
    }
    series.push(Series { name: "chance".into(), color: "#999999", points: vec![(0.0, 0.0), (1.0, 1.0)], dashed: true });
    if let Some(budget) = budget {
        series.push(Series {
            name: format!("budget {}%", budget * 100.0),
            color: "#d62728",
            points: vec![(budget, 0.0), (budget, 1.0)],
            dashed: false,
        });
    }
    chart.lines(&series);
    chart.finish()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
