//! Writes the CRD YAML files: `crdgen [--out-dir DIR]...`; without `--out-dir`, into `crds/generated/` and
//! `charts/mssql-pg-operator/crds/` of the workspace.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

#[derive(Parser)]
#[command(about = "Generate the mssqlpg.dev CustomResourceDefinitions")]
struct Args {
    /// Directory to write the CRD files into (repeatable); default: the crate's and the chart's folders.
    #[arg(long = "out-dir")]
    out_dirs: Vec<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let out_dirs = if args.out_dirs.is_empty() {
        let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        vec![
            crate_dir.join("generated"),
            crate_dir.join("../charts/mssql-pg-operator/crds"),
        ]
    } else {
        args.out_dirs
    };
    for (file, crd) in mssql_pg_crds::generate::all() {
        let yaml = mssql_pg_crds::generate::to_yaml(&crd).with_context(|| format!("rendering {file}"))?;
        for dir in &out_dirs {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let path = dir.join(&file);
            std::fs::write(&path, &yaml).with_context(|| format!("writing {}", path.display()))?;
            println!("{}", path.display());
        }
    }
    Ok(())
}
