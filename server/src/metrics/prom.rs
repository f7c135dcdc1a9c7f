//! A tiny writer for the Prometheus text format (0.0.4): `# HELP`, `# TYPE`, samples with
//! escaped label values. Enough for gauges and counters, which is all `/metrics` serves.

use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

#[derive(Debug, Default)]
pub struct PromText {
    out: String,
}

impl PromText {
    /// Start a metric family. Call once per name, before its samples.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        };
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl SampleValue) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", format_value(value.to_f64()));
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// Numbers a sample can carry. Counts above 2^53 lose precision, as they do in Prometheus.
pub trait SampleValue {
    fn to_f64(self) -> f64;
}

macro_rules! sample_value {
    ($($t:ty),*) => {$(
        impl SampleValue for $t {
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
sample_value!(u8, u32, u64, usize, i32, i64, f64);

fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_families_and_samples_in_the_text_format() {
        let mut m = PromText::default();
        m.family("deck_jobs", Kind::Gauge, "Jobs per pillar.");
        m.sample("deck_jobs", &[("pillar", "active")], 3);
        m.sample("deck_up", &[], 0.25);
        assert_eq!(
            m.finish(),
            "# HELP deck_jobs Jobs per pillar.\n# TYPE deck_jobs gauge\n\
             deck_jobs{pillar=\"active\"} 3\ndeck_up 0.25\n"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let mut m = PromText::default();
        m.sample("x", &[("queue", "a\"b\\c\nd"), ("k", "v")], 1);
        assert_eq!(m.finish(), "x{queue=\"a\\\"b\\\\c\\nd\",k=\"v\"} 1\n");
    }

    #[test]
    fn special_values_use_prometheus_spelling() {
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(1e20), "100000000000000000000");
        assert_eq!(format_value(-2.0), "-2");
    }
}
