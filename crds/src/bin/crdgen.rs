//! Writes the CRD files: `crdgen [--out-dir DIR]... [--chart-dir CHART]...`. Without either, the plain YAML into
//! `crds/generated/` and the Helm templates into `charts/mssql-pg-operator/templates/crds/` of the workspace.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Parser;

#[derive(Parser)]
#[command(about = "Generate the mssqlpg.dev CustomResourceDefinitions")]
struct Args {
    /// Directory to write the plain CRD files into (repeatable).
    #[arg(long = "out-dir")]
    out_dirs: Vec<PathBuf>,
    /// Chart directory whose templates/crds/ receives the CRDs as Helm templates (repeatable).
    #[arg(long = "chart-dir")]
    chart_dirs: Vec<PathBuf>,
}

fn write(dir: &Path, file: &str, content: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(file);
    std::fs::write(&path, content).with_context(|| format!("writing {}", path.display()))?;
    println!("{}", path.display());
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let mut args = Args::parse();
    if args.out_dirs.is_empty() && args.chart_dirs.is_empty() {
        let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        args.out_dirs.push(crate_dir.join("generated"));
        args.chart_dirs
            .push(crate_dir.join("../charts/mssql-pg-operator"));
    }
    for (file, crd) in mssql_pg_crds::generate::all() {
        let yaml = mssql_pg_crds::generate::to_yaml(&crd).with_context(|| format!("rendering {file}"))?;
        for dir in &args.out_dirs {
            write(dir, &file, &yaml)?;
        }
        let template =
            mssql_pg_crds::generate::to_chart_template(&crd).with_context(|| format!("rendering {file}"))?;
        for chart in &args.chart_dirs {
            write(
                &chart.join(mssql_pg_crds::generate::CHART_TEMPLATE_DIR),
                &file,
                &template,
            )?;
        }
    }
    Ok(())
}
