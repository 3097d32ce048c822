//! Names and labels shared by the operator and the worker.

/// Exit code of a worker step that failed in a way no retry gets past (an invalid spec, a refused
/// plan, data the target cannot hold, a verification that found a difference): the Jobs' pod
/// failure policy fails the Job on it at once instead of starting the pod again.
pub const EXIT_PERMANENT: u8 = 3;

/// Exit code of a worker called with arguments it does not take (clap's, and a bad `--metrics-addr`):
/// as permanent as [`EXIT_PERMANENT`]. An operator newer than its worker image (a pinned
/// `spec.worker.image`) passing a flag the worker does not know fails its Job at once this way.
pub const EXIT_USAGE: u8 = 2;

/// Exit code of a worker stopped by SIGTERM or SIGINT: the copy's chunk in flight was committed or
/// rolled back, and running the step again resumes after the last committed chunk. The Jobs' pod
/// failure policy does not count it against `backoffLimit` (a pod deleted or a node drained is not
/// the worker failing): the next pod resumes.
pub const EXIT_STOPPED: u8 = 4;

/// Exit code of a worker that found a task it was copying claimed by another worker since (its
/// fence, see the worker's `fence` module): it stopped without committing more of it. The Jobs'
/// pod failure policy fails the Job at once, so two workers never take a task from each other in
/// turn; the one that claimed last carries on.
pub const EXIT_TAKEN_OVER: u8 = 5;

/// API group of both resources.
pub const GROUP: &str = "mssqlpg.dev";
/// API version of both resources.
pub const VERSION: &str = "v1alpha1";

/// Label on MigrationTasks and Jobs: the owning Migration's name.
pub const LABEL_MIGRATION: &str = "mssqlpg.dev/migration";
/// Label on copy Jobs: the MigrationTask's name.
pub const LABEL_TASK: &str = "mssqlpg.dev/task";
/// Label on Jobs: which step the Job runs (`plan`, `copy`, `finalize`, `verify`).
pub const LABEL_STEP: &str = "mssqlpg.dev/step";
/// Annotation on an online Migration: tables (`schema.table` in the source, comma-separated) the
/// capture re-plans and copies again when a schema change paused them.
pub const ANNOTATION_REINITIALIZE: &str = "mssqlpg.dev/reinitialize";
/// Standard label naming the managing component.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`LABEL_MANAGED_BY`].
pub const MANAGER: &str = "mssql-pg-operator";

/// Port worker pods serve Prometheus `/metrics` on in a Job, declared in their pod spec under the name
/// [`WORKER_METRICS_PORT_NAME`] for the chart's PodMonitor.
pub const WORKER_METRICS_PORT: i32 = 9090;
/// Name of [`WORKER_METRICS_PORT`] in worker pod specs (the PodMonitor's `port:`).
pub const WORKER_METRICS_PORT_NAME: &str = "metrics";

/// Keys of a credentials Secret.
pub const SECRET_KEY_USERNAME: &str = "username";
pub const SECRET_KEY_PASSWORD: &str = "password";
/// Key of a CA Secret.
pub const SECRET_KEY_CA: &str = "ca.crt";

/// Longest Migration name: Job and task names embed it and pods label themselves with their Job's
/// name, which as a label value may not exceed 63 characters.
pub const MAX_MIGRATION_NAME_LEN: usize = 40;
/// Longest name the operator and worker give a MigrationTask or Job (label-value limit).
pub const MAX_OBJECT_NAME_LEN: usize = 63;

/// A DNS-1123 label of at most [`MAX_OBJECT_NAME_LEN`] characters built from `prefix` and free-form
/// `parts` (table names in any case and alphabet). Lossy slugging could map two tables to one name,
/// so a hash of the exact parts always ends the name.
pub fn object_name(prefix: &str, parts: &[&str]) -> String {
    let hash = fnv1a64(parts.join("\u{0}").as_bytes());
    let suffix = format!("{:08x}", (hash >> 32) as u32 ^ hash as u32);
    let mut slug = String::new();
    for part in parts {
        let s = slug_part(part);
        if s.is_empty() {
            continue;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&s);
    }
    let prefix = slug_part(prefix);
    // room for "-" + slug + "-" + suffix
    let budget = MAX_OBJECT_NAME_LEN.saturating_sub(prefix.len() + suffix.len() + 2);
    let slug: String = slug.chars().take(budget).collect();
    let slug = slug.trim_matches('-');
    let mut name = prefix;
    if !slug.is_empty() {
        if !name.is_empty() {
            name.push('-');
        }
        name.push_str(slug);
    }
    if !name.is_empty() {
        name.push('-');
    }
    name.push_str(&suffix);
    name
}

/// Name of the MigrationTask for range `index` of `schema.table`.
pub fn task_name(migration: &str, schema: &str, table: &str, index: i32) -> String {
    object_name(migration, &[schema, table, &index.to_string()])
}

fn slug_part(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// FNV-1a: stable across releases and platforms, unlike `std`'s hasher, so names stay the same after an
/// operator upgrade.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Whether `name` is a DNS-1123 label (lower-case alphanumerics and '-', alphanumeric at both ends).
pub fn is_dns1123_label(name: &str, max_len: usize) -> bool {
    !name.is_empty()
        && name.len() <= max_len
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_labels_and_distinct_after_slugging() {
        let a = task_name("orders-mig", "dbo", "Order Lines", 0);
        let b = task_name("orders-mig", "dbo", "order_lines", 0);
        assert_ne!(
            a, b,
            "tables slugging to the same text must still get distinct names"
        );
        assert!(a.starts_with("orders-mig-dbo-order-lines-0-"), "{a}");
        for n in [a, b] {
            assert!(is_dns1123_label(&n, MAX_OBJECT_NAME_LEN), "{n}");
        }
    }

    #[test]
    fn long_and_non_ascii_names_fit() {
        let long = "x".repeat(300);
        let n = task_name(&"m".repeat(40), "Продажи", &long, 15);
        assert_eq!(n.len(), MAX_OBJECT_NAME_LEN);
        assert!(is_dns1123_label(&n, MAX_OBJECT_NAME_LEN), "{n}");
        let n = task_name("m", "Продажи", "Заказы", 0);
        assert!(is_dns1123_label(&n, MAX_OBJECT_NAME_LEN), "{n}");
        assert_eq!(
            n,
            task_name("m", "Продажи", "Заказы", 0),
            "names are deterministic"
        );
    }
}
