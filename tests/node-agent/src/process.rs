//! One container instance as a local process in its own process group.
//!
//! A process group (not just the pid) is what gets signalled, because containers commonly run `sh -c` that
//! forks the real program; killing only the shell would leave the worker running. Each live group is also
//! recorded as a file under `<work>/pgids/` so `down.sh` can kill survivors even if the agent itself is
//! killed with SIGKILL.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use k8s_openapi::api::core::v1::Container;
use rustix::process::{Pid, Signal};

use crate::env::{EnvList, expand};

/// Where one container's files live.
#[derive(Debug, Clone)]
pub struct ContainerPaths {
    /// stdout and stderr, interleaved as `kubectl logs` would show them; appended across restarts.
    pub log: PathBuf,
    /// Given to the process as `TERMINATION_MESSAGE_PATH`, read when it exits.
    pub termination: PathBuf,
    /// Working directory when the spec sets none.
    pub work: PathBuf,
    /// Records the live process group for down.sh.
    pub pgid_file: PathBuf,
}

/// kubelet's limits: the message file is read up to 4096 bytes, the log fallback is the last 80 lines
/// capped at 2048 bytes.
const MESSAGE_MAX: usize = 4096;
const FALLBACK_LINES: usize = 80;
const FALLBACK_MAX: usize = 2048;

/// The program and arguments to run: `command` + `args`, with `$(VAR)` expanded. Images are ignored, so a
/// container without `command` runs the program named like the image's last path segment (for
/// `ghcr.io/acme/mssql-pg-operator:1.2`, `mssql-pg-operator`), which stands in for the image's entrypoint.
pub fn argv(container: &Container, env: &EnvList) -> Result<Vec<String>, String> {
    let mut argv: Vec<String> = container
        .command
        .iter()
        .flatten()
        .map(|s| expand(s, env))
        .collect();
    if argv.is_empty() {
        let image = container.image.as_deref().unwrap_or("");
        let name = image_program(image);
        if name.is_empty() {
            return Err(format!(
                "container {:?} has no command and no image to derive one from",
                container.name
            ));
        }
        argv.push(name);
    }
    argv.extend(container.args.iter().flatten().map(|s| expand(s, env)));
    Ok(argv)
}

fn image_program(image: &str) -> String {
    let without_digest = image.split('@').next().unwrap_or("");
    let last = without_digest.rsplit('/').next().unwrap_or("");
    last.split(':').next().unwrap_or("").to_string()
}

pub struct Spawned {
    pub child: tokio::process::Child,
    pub pgid: i32,
}

pub fn spawn(container: &Container, env: &EnvList, paths: &ContainerPaths) -> Result<Spawned, String> {
    let argv = argv(container, env)?;
    std::fs::create_dir_all(&paths.work).map_err(|e| format!("creating {}: {e}", paths.work.display()))?;
    // A fresh, empty message file per instance: a restarted container must not report its predecessor's.
    std::fs::write(&paths.termination, b"")
        .map_err(|e| format!("creating {}: {e}", paths.termination.display()))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&paths.log)
        .map_err(|e| format!("opening {}: {e}", paths.log.display()))?;
    let log_err = log
        .try_clone()
        .map_err(|e| format!("duplicating the log handle: {e}"))?;
    let cwd = container
        .working_dir
        .as_deref()
        .filter(|d| Path::new(d).is_dir())
        .map(PathBuf::from)
        .unwrap_or_else(|| paths.work.clone());

    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .envs(env.iter())
        .current_dir(&cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .process_group(0)
        .kill_on_drop(false);
    let child = cmd.spawn().map_err(|e| {
        format!(
            "failed to start container process {:?}: {e} (PATH={})",
            argv[0],
            env.get("PATH").unwrap_or("")
        )
    })?;
    let pgid = child.id().and_then(|id| i32::try_from(id).ok()).unwrap_or(0);
    if let Err(e) = std::fs::write(&paths.pgid_file, pgid.to_string()) {
        tracing::warn!(error = %e, file = %paths.pgid_file.display(), "could not record the process group");
    }
    Ok(Spawned { child, pgid })
}

/// Sends `signal` to the whole process group; a group that is already gone is not an error.
pub fn signal_group(pgid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pgid)
        && let Err(e) = rustix::process::kill_process_group(pid, signal)
        && e != rustix::io::Errno::SRCH
    {
        tracing::warn!(pgid, error = %e, "signalling a process group failed");
    }
}

/// The exit code as Kubernetes reports it: 128 + signal number for a process killed by a signal.
pub fn exit_code(status: &std::process::ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1)
}

/// The termination message: the file's contents, or with `FallbackToLogsOnError` and a failure, the tail of
/// the output when the file is empty.
pub fn termination_message(container: &Container, paths: &ContainerPaths, exit_code: i32) -> Option<String> {
    let from_file = read_head(&paths.termination, MESSAGE_MAX);
    if !from_file.is_empty() {
        return Some(from_file);
    }
    let fallback = container.termination_message_policy.as_deref() == Some("FallbackToLogsOnError");
    if fallback && exit_code != 0 {
        let tail = log_tail(&paths.log);
        if !tail.is_empty() {
            return Some(tail);
        }
    }
    None
}

fn read_head(path: &Path, max: usize) -> String {
    let mut buf = Vec::new();
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.take(max as u64).read_to_end(&mut buf);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

fn log_tail(path: &Path) -> String {
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    // Read a bounded window from the end: the log of a long-running worker may be large.
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let window = 64 * 1024;
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(window)));
    let mut buf = Vec::new();
    let _ = file.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.trim_end_matches('\n').lines().collect();
    let start = lines.len().saturating_sub(FALLBACK_LINES);
    let mut tail = lines[start..].join("\n");
    if tail.len() > FALLBACK_MAX {
        let mut cut = tail.len() - FALLBACK_MAX;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail = tail[cut..].to_string();
    }
    tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_stand_in_for_entrypoints() {
        assert_eq!(
            image_program("ghcr.io/acme/mssql-pg-operator:1.2"),
            "mssql-pg-operator"
        );
        assert_eq!(image_program("localhost:5000/worker@sha256:abc"), "worker");
        assert_eq!(image_program("busybox"), "busybox");
        assert_eq!(image_program(""), "");
    }

    #[test]
    fn argv_expands_references_and_appends_args() {
        let mut env = EnvList::default();
        env.set("WHO", "world".to_string());
        let c = Container {
            name: "c".into(),
            command: Some(vec!["echo".into(), "$(WHO)".into()]),
            args: Some(vec!["$$(WHO)".into()]),
            ..Default::default()
        };
        assert_eq!(argv(&c, &env).unwrap(), vec!["echo", "world", "$(WHO)"]);
        let no_cmd = Container {
            name: "c".into(),
            image: Some("reg/x/worker:1".into()),
            args: Some(vec!["--flag".into()]),
            ..Default::default()
        };
        assert_eq!(argv(&no_cmd, &env).unwrap(), vec!["worker", "--flag"]);
    }

    #[test]
    fn fallback_uses_the_log_tail_only_on_failure_with_an_empty_file() {
        let dir = std::env::temp_dir().join(format!("node-agent-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let paths = ContainerPaths {
            log: dir.join("c.log"),
            termination: dir.join("c.termination-log"),
            work: dir.clone(),
            pgid_file: dir.join("pgid"),
        };
        let lines: Vec<String> = (0..100).map(|i| format!("line {i}")).collect();
        std::fs::write(&paths.log, lines.join("\n") + "\n").unwrap();
        std::fs::write(&paths.termination, b"").unwrap();
        let mut c = Container {
            name: "c".into(),
            ..Default::default()
        };
        assert_eq!(termination_message(&c, &paths, 1), None);
        c.termination_message_policy = Some("FallbackToLogsOnError".into());
        assert_eq!(termination_message(&c, &paths, 0), None);
        let tail = termination_message(&c, &paths, 1).unwrap();
        assert!(
            tail.starts_with("line 20\n") && tail.ends_with("line 99"),
            "{tail}"
        );
        std::fs::write(&paths.termination, b"explicit").unwrap();
        assert_eq!(termination_message(&c, &paths, 1).as_deref(), Some("explicit"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
