//! Repeated measurements: every figure the harness reports is the median of `--repeat` runs, with
//! their range beside it, so one run disturbed by a busy (shared, 2-core) machine neither makes nor
//! hides a result, and the range shows how much the machine disturbed it.

use super::services::{Postgres, TdsServer};
use super::worker::{Config, RunResult, Runner};
use anyhow::Result;

/// The median and range of repeated measurements of one figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// How many measurements.
    pub n: usize,
}

impl Spread {
    /// Of the finite samples (a NaN or infinity from a division by a zero time is no measurement);
    /// `None` when there are none. An even count's median is the mean of the middle two.
    pub fn of(samples: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = samples.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    /// `median (min–max)` with `fmt` for each value; the median alone for a single measurement or
    /// when all are equal.
    pub fn show(&self, fmt: impl Fn(f64) -> String) -> String {
        if self.n < 2 || fmt(self.min) == fmt(self.max) {
            fmt(self.median)
        } else {
            format!("{} ({}–{})", fmt(self.median), fmt(self.min), fmt(self.max))
        }
    }
}

/// Median of `samples`, 0 when there is none (the reports print 0 rates as "–").
pub fn median(samples: impl IntoIterator<Item = f64>) -> f64 {
    Spread::of(samples).map_or(0.0, |s| s.median)
}

/// The runs of one worker configuration (at least one).
#[derive(Debug, Clone)]
pub struct Repeated {
    pub runs: Vec<RunResult>,
}

impl Repeated {
    /// Runs the worker `times` times with `config` (at least once).
    pub async fn measure(
        runner: &mut Runner,
        config: &Config,
        times: u32,
        mssql: &TdsServer,
        pg: &Postgres,
    ) -> Result<Repeated> {
        let mut runs = Vec::new();
        for _ in 0..times.max(1) {
            runs.push(runner.run(config, mssql, pg).await?);
        }
        Ok(Repeated { runs })
    }
}

impl Repeated {
    pub fn one(run: RunResult) -> Self {
        Repeated { runs: vec![run] }
    }

    pub fn config(&self) -> &Config {
        &self.runs[0].config
    }

    /// Every run succeeded.
    pub fn ok(&self) -> bool {
        self.runs.iter().all(|r| r.ok)
    }

    /// The first failed run, for its error.
    pub fn failed(&self) -> Option<&RunResult> {
        self.runs.iter().find(|r| !r.ok)
    }

    /// A figure over the runs.
    pub fn spread(&self, figure: impl Fn(&RunResult) -> f64) -> Spread {
        Spread::of(self.runs.iter().map(figure)).unwrap_or(Spread {
            median: 0.0,
            min: 0.0,
            max: 0.0,
            n: 0,
        })
    }

    /// The median rows/s of the copy phase.
    pub fn rows_per_second(&self) -> f64 {
        self.spread(RunResult::rows_per_second).median
    }

    /// The median copy phase seconds.
    pub fn copy_seconds(&self) -> f64 {
        self.spread(|r| r.copy_seconds).median
    }

    /// Rows/s of one table over the runs that copied it.
    pub fn table_rate(&self, table: &str) -> Option<Spread> {
        Spread::of(
            self.runs
                .iter()
                .filter_map(|r| r.tables.get(table))
                .map(|t| t.rows_per_second()),
        )
    }

    /// The highest peak RSS of any run.
    pub fn peak_rss(&self) -> u64 {
        self.runs.iter().map(|r| r.max_rss_bytes).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::super::worker::{Direction, Mode, TableRun};
    use super::*;

    #[test]
    fn spread_is_the_median_and_range_of_the_finite_samples() {
        assert_eq!(
            Spread::of([3.0, 1.0, 2.0]),
            Some(Spread {
                median: 2.0,
                min: 1.0,
                max: 3.0,
                n: 3
            })
        );
        // An even count: the mean of the middle two, whatever the order.
        assert_eq!(
            Spread::of([10.0, 4.0, 1.0, 6.0]),
            Some(Spread {
                median: 5.0,
                min: 1.0,
                max: 10.0,
                n: 4
            })
        );
        // One outlier moves the range, not the median.
        assert_eq!(Spread::of([100.0, 101.0, 5.0]).map(|s| s.median), Some(100.0));
        assert_eq!(
            Spread::of([f64::NAN, 7.0, f64::INFINITY]),
            Some(Spread {
                median: 7.0,
                min: 7.0,
                max: 7.0,
                n: 1
            })
        );
        assert_eq!(Spread::of([]), None);
        assert_eq!(median([]), 0.0);
        assert_eq!(median([2.0, 9.0]), 5.5);
    }

    #[test]
    fn spread_shows_the_range_only_when_it_says_something() {
        let two = |x: f64| format!("{x:.2}");
        let s = Spread::of([1.5, 1.25, 2.0]).expect("samples");
        assert_eq!(s.show(two), "1.50 (1.25–2.00)");
        assert_eq!(Spread::of([1.5]).expect("one").show(two), "1.50");
        // Equal once formatted: no range.
        assert_eq!(Spread::of([1.501, 1.499]).expect("two").show(two), "1.50");
    }

    fn run(rows: u64, copy_seconds: f64, rss: u64, ok: bool, table_seconds: f64) -> RunResult {
        RunResult {
            config: Config {
                label: "default".into(),
                direction: Direction::MssqlToPg,
                mode: Mode::DropRecreate,
                packet_size: 32767,
                parallelism: 4,
                chunk_rows: None,
                chunk_bytes: None,
                partitioning: None,
                verify: "count",
                pg_schema: "so".into(),
                include: Vec::new(),
                source_schemas: Vec::new(),
            },
            ok,
            verified: ok,
            error: (!ok).then(|| "boom".to_owned()),
            rows,
            copy_seconds,
            seconds: copy_seconds + 1.0,
            requested_packet_size: Some(32767),
            negotiated_packet_size: Some(32767),
            max_rss_bytes: rss,
            self_peak_bytes: None,
            user_seconds: copy_seconds / 2.0,
            system_seconds: 0.0,
            server_cpu_seconds: None,
            tables: BTreeMap::from([(
                "Votes".to_owned(),
                TableRun {
                    rows,
                    task_seconds: table_seconds,
                },
            )]),
            log: PathBuf::new(),
        }
    }

    #[test]
    fn repeated_runs_give_medians_ranges_and_the_highest_peak() {
        let r = Repeated {
            runs: vec![
                run(1000, 2.0, 50, true, 4.0),
                run(1000, 1.0, 70, true, 2.0),
                run(1000, 4.0, 60, true, 5.0),
            ],
        };
        assert_eq!(r.rows_per_second(), 500.0);
        assert_eq!(r.copy_seconds(), 2.0);
        let rate = r.spread(RunResult::rows_per_second);
        assert_eq!((rate.min, rate.max, rate.n), (250.0, 1000.0, 3));
        assert_eq!(
            r.table_rate("Votes"),
            Some(Spread {
                median: 250.0,
                min: 200.0,
                max: 500.0,
                n: 3
            })
        );
        assert_eq!(r.table_rate("Posts"), None);
        assert_eq!(r.peak_rss(), 70);
        assert!(r.ok());
        assert!(r.failed().is_none());

        let mut failing = r.clone();
        failing.runs.push(run(10, 1.0, 80, false, 1.0));
        assert!(!failing.ok());
        assert_eq!(failing.failed().map(|f| f.rows), Some(10));
        assert_eq!(failing.peak_rss(), 80);
    }

    #[test]
    fn a_run_row_gives_each_figure_as_median_and_range() {
        let mib = 1024 * 1024;
        let r = Repeated {
            runs: vec![
                run(1000, 2.0, 50 * mib, true, 4.0),
                run(1000, 1.0, 70 * mib, true, 2.0),
                run(1000, 4.0, 60 * mib, true, 5.0),
            ],
        };
        let row = super::super::report::run_row(&r);
        assert!(
            row.contains(
                "| 3 | 1,000 | 2.00 (1.00–4.00) | **500 (250–1,000)** | 60.0 (50.0–70.0) | 1.00 (0.50–2.00) | ? \
                 | 3.00 (2.00–5.00) | verified |"
            ),
            "{row}"
        );
        let mut failing = r.clone();
        failing.runs.push(run(1000, 2.0, 50 * mib, false, 4.0));
        let row = super::super::report::run_row(&failing);
        assert!(row.ends_with("| FAILED (1 of 4): boom |"), "{row}");
        // A single run: plain figures.
        let row = super::super::report::run_row(&Repeated::one(r.runs[0].clone()));
        assert!(row.contains("| 1 | 1,000 | 2.00 | **500** | 50.0 |"), "{row}");
    }
}
