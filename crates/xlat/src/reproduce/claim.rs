//! A paper's claim as data: what the paper says, the numbers it gives, what xlat measured from its
//! raw counters, and a verdict anyone can recompute from the two (docs/reproduce.md, "Claims").
//!
//! Every claim of every reproduction is one [`Claim`]. Its `expect` holds the paper's own numbers:
//! a range (`lo`, `hi`, either one missing where the paper gives one bound), one value with the
//! slack the paper's wording allows (`value`, `tol`: "about twice" is value 2), or a ranking
//! (`order`: series from the smallest measured value to the largest). Each paper states one
//! relative tolerance, applied the same way to every numeric claim: the range `[lo, hi]` widens to
//! `[lo - t|lo|, hi + t|hi|]`. A claim agrees when every measured value lies in its widened range
//! (a ranking: when every group of measured values is strictly increasing in the order given).
//! A claim whose measured value is one of the model's inputs is `by-construction` and not counted;
//! one that nothing measured (a quick run's inputs are too small) is `not-measured`.

use serde::{Deserialize, Serialize};

/// What the paper says the measurement should be.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Expect {
    /// A ranking: the named series from smallest to largest measured value.
    Order {
        /// Series names, smallest first.
        order: Vec<String>,
    },
    /// One value, give or take `tol` (the paper's "about").
    Value {
        /// The paper's number.
        value: f64,
        /// How far the paper's wording lets the value stray (0: the number as given).
        tol: f64,
    },
    /// A range; a missing bound is open.
    Range {
        /// Lowest value the paper allows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lo: Option<f64>,
        /// Highest value the paper allows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hi: Option<f64>,
    },
}

impl Expect {
    /// `lo <= x <= hi`.
    pub fn range(lo: f64, hi: f64) -> Self {
        Expect::Range { lo: Some(lo), hi: Some(hi) }
    }
    /// `x >= lo`.
    pub fn at_least(lo: f64) -> Self {
        Expect::Range { lo: Some(lo), hi: None }
    }
    /// `x <= hi`.
    pub fn at_most(hi: f64) -> Self {
        Expect::Range { lo: None, hi: Some(hi) }
    }
    /// `value` give or take `tol`.
    pub fn about(value: f64, tol: f64) -> Self {
        Expect::Value { value, tol }
    }
    /// Series from smallest to largest.
    pub fn order(series: &[&str]) -> Self {
        Expect::Order { order: series.iter().map(|s| s.to_string()).collect() }
    }

    /// The accepted interval after the paper's relative tolerance `t` (`None` for a ranking).
    pub fn interval(&self, t: f64) -> Option<(f64, f64)> {
        let (lo, hi) = match *self {
            Expect::Order { .. } => return None,
            Expect::Value { value, tol } => (Some(value - tol), Some(value + tol)),
            Expect::Range { lo, hi } => (lo, hi),
        };
        Some((lo.map_or(f64::NEG_INFINITY, |l| l - t * l.abs()), hi.map_or(f64::INFINITY, |h| h + t * h.abs())))
    }

    /// The paper's numbers in words, e.g. `0.40–0.50`, `≥ 0.2`, `about 2 (±0.5)`.
    pub fn text(&self) -> String {
        match self {
            Expect::Order { order } => order.join(" < "),
            Expect::Value { value, tol } if *tol == 0.0 => num(*value),
            Expect::Value { value, tol } => format!("about {} (±{})", num(*value), num(*tol)),
            Expect::Range { lo: Some(l), hi: Some(h) } => format!("{}–{}", num(*l), num(*h)),
            Expect::Range { lo: Some(l), hi: None } => format!("≥ {}", num(*l)),
            Expect::Range { lo: None, hi: Some(h) } => format!("≤ {}", num(*h)),
            Expect::Range { lo: None, hi: None } => "any".to_string(),
        }
    }
}

/// One measured number: a workload (and the point of a sweep or the series of a ranking).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The workload (or program) measured.
    pub workload: String,
    /// The point of a sweep (e.g. `p=64`), if the claim covers several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<String>,
    /// The series of a ranking (one of `expect.order`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<String>,
    /// The number, computed from raw counters.
    pub value: f64,
}

/// How a claim came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every measured value lies in the expected range.
    Agrees,
    /// Some measured value does not.
    Differs,
    /// The measured value is one of the model's inputs: not evidence, not counted.
    ByConstruction,
    /// Nothing was measured (say why).
    NotMeasured,
}

impl Verdict {
    /// As written in results.json and the report.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Agrees => "agrees",
            Verdict::Differs => "differs",
            Verdict::ByConstruction => "by-construction",
            Verdict::NotMeasured => "not-measured",
        }
    }
}

/// One claim of a paper beside xlat's measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// Stable identifier, `paper.place.what` (e.g. `bala94.t3.ptlb-ipc`).
    pub id: String,
    /// Where in the paper (e.g. `bala94 Table 3`).
    pub source: String,
    /// The claim in words.
    pub paper: String,
    /// The paper's numbers.
    pub expect: Expect,
    /// What xlat measured, one number per workload (and point).
    pub measured: Vec<Measured>,
    /// The outcome.
    pub verdict: Verdict,
    /// Why it differs, is by construction or was not measured (empty when it agrees).
    pub why: String,
}

impl Claim {
    /// A claim with nothing measured yet.
    pub fn new(id: &str, source: &str, paper: &str, expect: Expect) -> Self {
        Claim {
            id: id.to_string(),
            source: source.to_string(),
            paper: paper.to_string(),
            expect,
            measured: Vec::new(),
            verdict: Verdict::NotMeasured,
            why: String::new(),
        }
    }

    /// Adds a measured value of `workload`; a value that is not a number (nothing to divide by)
    /// is left out.
    pub fn measure(mut self, workload: &str, value: f64) -> Self {
        self.push(workload, None, None, value);
        self
    }

    /// Adds a measured value of `workload` at `point` of a sweep.
    pub fn measure_at(mut self, workload: &str, point: &str, value: f64) -> Self {
        self.push(workload, Some(point), None, value);
        self
    }

    /// Adds a measured value of `series` (for a ranking) of `workload`, at `point` if given.
    pub fn measure_series(mut self, workload: &str, point: Option<&str>, series: &str, value: f64) -> Self {
        self.push(workload, point, Some(series), value);
        self
    }

    fn push(&mut self, workload: &str, point: Option<&str>, series: Option<&str>, value: f64) {
        if value.is_finite() {
            self.measured.push(Measured {
                workload: workload.to_string(),
                point: point.map(str::to_string),
                series: series.map(str::to_string),
                value,
            });
        }
    }

    /// Judges the claim under the paper's tolerance `t`. `why` says why it differs (kept only when
    /// it does); `unmeasured` says why nothing was measured (kept only when nothing was).
    pub fn judge(mut self, t: f64, why: &str, unmeasured: &str) -> Self {
        match judge(&self.expect, &self.measured, t) {
            None => {
                self.verdict = Verdict::NotMeasured;
                self.why = unmeasured.to_string();
            }
            Some(true) => {
                self.verdict = Verdict::Agrees;
                self.why.clear();
            }
            Some(false) => {
                self.verdict = Verdict::Differs;
                self.why = why.to_string();
            }
        }
        self
    }

    /// Marks the claim as resting on a model input: `why` names the input.
    pub fn by_construction(mut self, why: &str) -> Self {
        self.verdict = Verdict::ByConstruction;
        self.why = why.to_string();
        self
    }

    /// The measured values in a few words: `mdb 0.51, bigmsg 0.30`.
    pub fn measured_text(&self) -> String {
        if self.measured.is_empty() {
            return "—".to_string();
        }
        self.measured
            .iter()
            .map(|m| {
                let mut s = m.workload.clone();
                for x in [&m.point, &m.series].into_iter().flatten() {
                    s += &format!(" {x}");
                }
                format!("{s} {}", num(m.value))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `Some(agrees)` from the numbers, `None` when nothing was measured.
pub fn judge(expect: &Expect, measured: &[Measured], t: f64) -> Option<bool> {
    if measured.is_empty() {
        return None;
    }
    if let Expect::Order { order } = expect {
        // Group by (workload, point); each group must hold every series once, increasing.
        let mut groups: Vec<(&str, Option<&str>)> = Vec::new();
        for m in measured {
            let g = (m.workload.as_str(), m.point.as_deref());
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        return Some(groups.iter().all(|&(w, p)| {
            let values: Vec<Option<f64>> = order
                .iter()
                .map(|s| {
                    measured
                        .iter()
                        .find(|m| m.workload == w && m.point.as_deref() == p && m.series.as_deref() == Some(s.as_str()))
                        .map(|m| m.value)
                })
                .collect();
            values.iter().all(Option::is_some) && values.windows(2).all(|v| v[0] < v[1])
        }));
    }
    let (lo, hi) = expect.interval(t).expect("numeric");
    Some(measured.iter().all(|m| m.value >= lo && m.value <= hi))
}

/// A number in a few significant digits.
pub fn num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    let digits = if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 0.1 {
        3
    } else {
        (2 - a.log10().floor() as i32).clamp(3, 8) as usize
    };
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A paper's claims counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Claims that are evidence: agreeing, differing or not measured (not by construction).
    pub independent: usize,
    /// Claims that agree.
    pub agrees: usize,
    /// Claims that differ.
    pub differs: usize,
    /// Independent claims that nothing measured.
    pub not_measured: usize,
    /// Claims resting on a model input (not counted).
    pub by_construction: usize,
}

impl Totals {
    /// Counts `claims`.
    pub fn of(claims: &[Claim]) -> Self {
        let mut t = Totals::default();
        for c in claims {
            match c.verdict {
                Verdict::Agrees => t.agrees += 1,
                Verdict::Differs => t.differs += 1,
                Verdict::NotMeasured => t.not_measured += 1,
                Verdict::ByConstruction => t.by_construction += 1,
            }
        }
        t.independent = t.agrees + t.differs + t.not_measured;
        t
    }

    /// `6 of 9 independent claims agree (2 differ, 1 not measured; 1 by construction, not counted)`.
    pub fn sentence(&self) -> String {
        let mut rest = vec![format!("{} differ", self.differs)];
        if self.not_measured > 0 {
            rest.push(format!("{} not measured", self.not_measured));
        }
        let mut s = format!("{} of {} independent claims agree ({}", self.agrees, self.independent, rest.join(", "));
        if self.by_construction > 0 {
            s += &format!("; {} by construction, not counted", self.by_construction);
        }
        s + ")"
    }
}

/// The claims of one paper with the tolerance they were judged under.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// The relative tolerance applied to every numeric claim.
    pub tolerance: f64,
    /// The claims.
    pub claims: Vec<Claim>,
}

impl Claims {
    /// Their totals.
    pub fn totals(&self) -> Totals {
        Totals::of(&self.claims)
    }

    /// The fields results.json carries: `tolerance`, `totals`, `claims`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({ "tolerance": self.tolerance, "totals": self.totals(), "claims": self.claims })
    }

    /// The report's claims section: the totals, the tolerance, and one row per claim.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "{}. Every numeric claim is judged with a tolerance of ±{}% of the paper's bounds; a claim \
             agrees when every measured value lies in its range.\n\n\
             | claim | paper | expected | measured | verdict | why |\n|---|---|---|---|---|---|\n",
            self.totals().sentence(),
            num(self.tolerance * 100.0)
        );
        for c in &self.claims {
            s += &format!(
                "| `{}` ({}) | {} | {} | {} | {} | {} |\n",
                c.id,
                c.source,
                cell(&c.paper),
                cell(&c.expect.text()),
                cell(&c.measured_text()),
                c.verdict.name(),
                cell(&c.why)
            );
        }
        s
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(w: &str, v: f64) -> Measured {
        Measured { workload: w.into(), point: None, series: None, value: v }
    }

    #[test]
    fn ranges_widen_by_the_relative_tolerance_on_both_sides() {
        let e = Expect::range(0.40, 0.50);
        assert_eq!(judge(&e, &[m("a", 0.37)], 0.1), Some(true)); // 0.40 - 0.04 = 0.36
        assert_eq!(judge(&e, &[m("a", 0.35)], 0.1), Some(false));
        assert_eq!(judge(&e, &[m("a", 0.55)], 0.1), Some(true)); // 0.50 + 0.05
        assert_eq!(judge(&e, &[m("a", 0.56)], 0.1), Some(false));
        assert_eq!(judge(&e, &[m("a", 0.45), m("b", 0.9)], 0.1), Some(false), "every value must lie inside");
        assert_eq!(judge(&Expect::at_least(0.2), &[m("a", 1e9)], 0.0), Some(true));
        assert_eq!(judge(&Expect::at_most(0.0), &[m("a", 0.001)], 0.5), Some(false), "0 has no slack");
        assert_eq!(judge(&Expect::about(2.0, 0.5), &[m("a", 1.5)], 0.0), Some(true));
        assert_eq!(judge(&Expect::about(2.0, 0.5), &[m("a", 1.4)], 0.0), Some(false));
        assert_eq!(judge(&e, &[], 0.1), None);
    }

    #[test]
    fn rankings_hold_per_workload_and_point() {
        let e = Expect::order(&["a", "b"]);
        let s = |w: &str, p: Option<&str>, x: &str, v: f64| Measured {
            workload: w.into(),
            point: p.map(Into::into),
            series: Some(x.into()),
            value: v,
        };
        assert_eq!(judge(&e, &[s("w", None, "a", 1.0), s("w", None, "b", 2.0)], 0.5), Some(true));
        assert_eq!(judge(&e, &[s("w", None, "a", 2.0), s("w", None, "b", 2.0)], 0.5), Some(false), "strict");
        let two = [s("w", Some("1"), "a", 1.0), s("w", Some("1"), "b", 2.0), s("w", Some("2"), "b", 1.0)];
        assert_eq!(judge(&e, &two, 0.0), Some(false), "a group missing a series does not agree");
    }

    #[test]
    fn claims_serialise_as_documented_and_round_trip() {
        let c = Claim::new("p.t1.x", "p Table 1", "x is small", Expect::range(0.4, 0.5))
            .measure("mdb", 0.51)
            .measure("nan", f64::NAN)
            .judge(0.1, "too big", "");
        assert_eq!(c.verdict, Verdict::Agrees);
        assert_eq!(c.measured.len(), 1, "NaN is left out");
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["expect"], serde_json::json!({"lo": 0.4, "hi": 0.5}));
        assert_eq!(v["measured"][0], serde_json::json!({"workload": "mdb", "value": 0.51}));
        assert_eq!(v["verdict"], "agrees");
        assert_eq!(serde_json::from_value::<Claim>(v).unwrap(), c);
        for e in [Expect::order(&["a", "b"]), Expect::about(2.0, 0.5), Expect::at_least(1.0)] {
            let back: Expect = serde_json::from_value(serde_json::to_value(&e).unwrap()).unwrap();
            assert_eq!(back, e);
        }
        let c = Claim::new("p.x", "p", "x", Expect::at_least(1.0)).by_construction("an input");
        let t = Totals::of(&[c, Claim::new("p.y", "p", "y", Expect::at_least(1.0)).judge(0.0, "", "too small")]);
        assert_eq!((t.independent, t.not_measured, t.by_construction), (1, 1, 1));
    }

    #[test]
    fn numbers_print_in_a_few_digits() {
        assert_eq!(num(0.5123), "0.512");
        assert_eq!(num(1.34), "1.34");
        assert_eq!(num(45.0), "45");
        assert_eq!(num(0.00123), "0.00123");
        assert_eq!(num(1234.6), "1235");
    }
}
