//! The engine's temporary data directory (in `/dev/shm` where there is one), and the removal of
//! those that servers killed without a chance to clean up left behind.
//!
//! Benchmarks and tests stop test servers with SIGKILL, and a server stopped by a signal exits
//! while its sessions still hold the engine; either way the database stayed in `/dev/shm`, in
//! memory, until the machine restarted (14 GB after a day of benchmarks). Each directory now
//! holds an `owner.lock` that its server keeps locked for as long as it runs: a directory whose
//! lock can be taken belongs to no running server, whatever PID namespace it ran in.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const PREFIX: &str = "tds-engine-";
const LOCK_FILE: &str = "owner.lock";

/// An unlocked directory younger than this may belong to a server that has created it but not
/// yet locked it; a directory without a lock file (written by an older server) is only removed
/// when none of its files changed for [`LEGACY_IDLE`].
const CREATION_GRACE: Duration = Duration::from_secs(60);
const LEGACY_IDLE: Duration = Duration::from_secs(3600);

/// A temporary data directory, removed when dropped.
pub(crate) struct TempDataDir {
    dir: tempfile::TempDir,
    /// Held locked for the directory's lifetime; the lock goes with the process.
    _owner: File,
}

impl TempDataDir {
    /// Removes what killed servers left in the base directory, then creates a new directory.
    pub(crate) fn create() -> io::Result<TempDataDir> {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        remove_orphans(&base);
        let dir = tempfile::Builder::new().prefix(PREFIX).tempdir_in(&base)?;
        let owner = File::create(dir.path().join(LOCK_FILE))?;
        owner.try_lock().map_err(io::Error::other)?;
        Ok(TempDataDir { dir, _owner: owner })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the `tds-engine-*` directories in `base` that no running server owns. Errors are
/// ignored: a directory that cannot be inspected or removed is left as it was.
fn remove_orphans(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_engine_dir = entry.file_name().to_string_lossy().starts_with(PREFIX)
            && entry.file_type().is_ok_and(|t| t.is_dir());
        if is_engine_dir && is_orphan(&path) {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    tracing::info!(dir = %path.display(), "removed a data directory a stopped server left behind")
                }
                Err(e) => {
                    tracing::debug!(dir = %path.display(), error = %e, "could not remove a left-behind data directory")
                }
            }
        }
    }
}

fn is_orphan(dir: &Path) -> bool {
    let now = SystemTime::now();
    let age = |p: &Path| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
    };
    match File::open(dir.join(LOCK_FILE)) {
        // Taken only when no process holds it; dropped (released) at once.
        Ok(lock) => lock.try_lock().is_ok() && age(dir).is_some_and(|a| a > CREATION_GRACE),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let idle = |name: &str| age(&dir.join(name)).is_none_or(|a| a > LEGACY_IDLE);
            age(dir).is_some_and(|a| a > CREATION_GRACE)
                && ["engine.sqlite", "engine.sqlite-wal", "engine.sqlite-shm"]
                    .iter()
                    .all(|f| idle(f))
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_old(path: &Path) {
        let old = SystemTime::now() - Duration::from_secs(7200);
        let f = File::options().read(true).open(path).expect("open");
        f.set_modified(old).expect("set mtime");
    }

    #[test]
    fn removes_only_directories_no_running_server_owns() {
        let base = tempfile::tempdir().expect("base");
        let mk = |name: &str| {
            let d = base.path().join(name);
            std::fs::create_dir(&d).expect("dir");
            d
        };
        // A killed server's: lock file present, nobody holds it.
        let dead = mk("tds-engine-dead");
        File::create(dead.join(LOCK_FILE)).expect("lock file");
        std::fs::write(dead.join("engine.sqlite"), b"x").expect("db");
        set_old(&dead);
        // A running server's: its lock is held.
        let live = mk("tds-engine-live");
        let held = File::create(live.join(LOCK_FILE)).expect("lock file");
        held.try_lock().expect("lock");
        set_old(&live);
        // Just created, not locked yet.
        let young = mk("tds-engine-young");
        File::create(young.join(LOCK_FILE)).expect("lock file");
        // An older server's, idle for two hours, and one in use a moment ago.
        let legacy_idle = mk("tds-engine-legacy-idle");
        std::fs::write(legacy_idle.join("engine.sqlite"), b"x").expect("db");
        set_old(&legacy_idle.join("engine.sqlite"));
        set_old(&legacy_idle);
        let legacy_busy = mk("tds-engine-legacy-busy");
        std::fs::write(legacy_busy.join("engine.sqlite"), b"x").expect("db");
        set_old(&legacy_busy);
        // Not ours.
        let other = mk("something-else");
        set_old(&other);

        remove_orphans(base.path());

        assert!(!dead.exists(), "a killed server's directory is removed");
        assert!(
            !legacy_idle.exists(),
            "an idle directory of an older server is removed"
        );
        for kept in [&live, &young, &legacy_busy, &other] {
            assert!(kept.exists(), "{} is kept", kept.display());
        }
        drop(held);
    }

    #[test]
    fn a_new_directory_is_locked_while_it_lives_and_removed_on_drop() {
        let d = TempDataDir::create().expect("create");
        let path = d.path().to_path_buf();
        let probe = File::open(path.join(LOCK_FILE)).expect("lock file");
        assert!(probe.try_lock().is_err(), "the owner holds the lock");
        drop(d);
        assert!(!path.exists());
    }
}
