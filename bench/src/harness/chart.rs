//! PNG charts of the harness results (plotters, bitmap backend). Text is drawn with ab_glyph
//! from a TrueType font read at run time, so no fontconfig/freetype is needed to build.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow, bail};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::HarnessResults;
use super::stats::{Repeated, median};
use super::worker::rate;

const FONT: &str = "sans-serif";
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

fn ensure_font() -> Result<()> {
    static LOADED: OnceLock<bool> = OnceLock::new();
    let ok = *LOADED.get_or_init(|| {
        let path = std::env::var("BENCH_CHART_FONT")
            .ok()
            .into_iter()
            .chain(FONT_PATHS.iter().map(|p| (*p).to_owned()))
            .find(|p| Path::new(p).exists());
        let Some(bytes) = path.and_then(|p| std::fs::read(p).ok()) else {
            return false;
        };
        // plotters keeps registered fonts for the whole process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok()
    });
    if ok {
        Ok(())
    } else {
        bail!("no TrueType font found (set BENCH_CHART_FONT to a .ttf file, e.g. DejaVuSans.ttf)")
    }
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing the chart: {e:?}")
}

/// Vertical bars grouped by `groups`, one bar per series in each group.
pub fn grouped_bars(
    area: &Area,
    title: &str,
    groups: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<()> {
    let max = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1.0);
    let n = groups.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 20))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..n as f64, 0f64..max * 1.15)
        .map_err(err)?;
    let names = groups.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&move |x| {
            let i = (*x - 0.5).round();
            if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("rows/s")
        .y_label_formatter(&|y| super::report::fmt_rate(*y))
        .label_style((FONT, 13))
        .draw()
        .map_err(err)?;
    let k = series.len().max(1) as f64;
    let width = 0.8 / k;
    for (s, (name, values)) in series.iter().enumerate() {
        let color = COLORS[s % COLORS.len()];
        chart
            .draw_series(values.iter().enumerate().map(|(g, v)| {
                let x0 = g as f64 + 0.1 + s as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.92, *v)], color.filled())
            }))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(err)?;
    Ok(())
}

/// Horizontal bars, one per label.
pub fn horizontal_bars(area: &Area, title: &str, labels: &[String], values: &[f64]) -> Result<()> {
    let max = values.iter().copied().fold(0.0f64, f64::max).max(1.0);
    let n = labels.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 20))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(330)
        .build_cartesian_2d(0f64..max * 1.15, 0f64..n as f64)
        .map_err(err)?;
    let names = labels.to_vec();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n * 2 + 1)
        .y_label_formatter(&move |y| {
            let i = (*y - 0.5).round();
            if (y - 0.5 - i).abs() < 1e-6 && i >= 0.0 {
                // Top to bottom in the given order.
                let idx = n.saturating_sub(1).saturating_sub(i as usize);
                names.get(idx).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_desc("rows/s")
        .x_label_formatter(&|x| super::report::fmt_rate(*x))
        .label_style((FONT, 13))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(values.iter().enumerate().map(|(i, v)| {
            let y0 = (n - 1 - i) as f64 + 0.15;
            Rectangle::new([(0.0, y0), (*v, y0 + 0.7)], COLORS[0].filled())
        }))
        .map_err(err)?;
    Ok(())
}

pub fn harness_chart(r: &HarnessResults, path: &Path) -> Result<()> {
    ensure_font()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let root = BitMapBackend::new(path, (1400, 1100)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, bottom) = root.split_vertically(560);

    // Tables big enough for a rate to mean something.
    let tables: Vec<&String> = r
        .limits
        .iter()
        .filter(|(_, l)| l.rows >= 1000)
        .map(|(n, _)| n)
        .collect();
    let groups: Vec<String> = tables.iter().map(|t| (*t).clone()).collect();
    let per = |f: &dyn Fn(&String) -> f64| tables.iter().map(|t| f(t)).collect::<Vec<f64>>();
    // Medians of the repetitions.
    let limit = |t: &String, pick: fn(&super::TableLimits) -> &[f64]| {
        r.limits
            .get(t)
            .map_or(0.0, |l| median(pick(l).iter().map(|s| rate(l.rows, *s))))
    };
    let series = vec![
        (
            "worker (default settings)".to_owned(),
            per(&|t| r.main.table_rate(t).map_or(0.0, |s| s.median)),
        ),
        (
            "PostgreSQL COPY FROM file".to_owned(),
            per(&|t| limit(t, |l| &l.pg_copy)),
        ),
        (
            "tiberius stream to nowhere".to_owned(),
            per(&|t| limit(t, |l| &l.stream)),
        ),
        ("tiberius bulk load".to_owned(), per(&|t| limit(t, |l| &l.bulk))),
    ];
    grouped_bars(
        &top,
        &format!(
            "Per table, scale {} (SQL Server → PostgreSQL, and the limits)",
            r.scale
        ),
        &groups,
        &series,
    )?;

    let runs: Vec<&Repeated> = std::iter::once(&r.main)
        .chain(&r.sweeps)
        .chain(r.reverse.iter().filter(|x| x.ok()))
        .chain(r.upsert.iter())
        .collect();
    let labels: Vec<String> = runs
        .iter()
        .map(|x| {
            let c = x.config();
            let dir = match c.direction {
                super::Direction::MssqlToPg => "MS→PG",
                super::Direction::PgToMssql => "PG→MS",
            };
            format!("{dir} {} ({})", c.label, c.mode)
        })
        .collect();
    let values: Vec<f64> = runs.iter().map(|x| x.rows_per_second()).collect();
    horizontal_bars(
        &bottom,
        &format!("Whole copy phase per configuration, scale {}", r.scale),
        &labels,
        &values,
    )?;
    root.present().map_err(err)?;
    Ok(())
}
