//! What the online suites of both directions share: a `run -f` in the background with its JSON
//! lines, `cutover -f`, and the seeded generator of their workloads.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `run -f` in the background, its JSON lines collected.
pub struct Running {
    child: Child,
    lines: Arc<Mutex<Vec<serde_json::Value>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Starts `cmd` (a `run -f FILE` of the worker) with its stdout read line by line.
    pub fn start(mut cmd: Command) -> Running {
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let collected = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str(&line) {
                    Ok(v) => collected.lock().unwrap().push(v),
                    Err(_) => eprintln!("run: {line}"),
                }
            }
        });
        Running {
            child,
            lines,
            reader: Some(reader),
        }
    }

    pub fn last(&self, event: &str) -> Option<serde_json::Value> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|v| v["event"] == event)
            .cloned()
    }

    /// Waits until the stream applied at least `changes` changes and a heartbeat (or panics
    /// after `limit`).
    pub async fn wait_streaming(&mut self, changes: u64, limit: Duration) -> serde_json::Value {
        let started = Instant::now();
        loop {
            if let Some(s) = self.last("streaming")
                && s["changes_applied"].as_u64().unwrap_or(0) >= changes
                && s["lag_seconds"].is_number()
            {
                return s;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // Its last lines (the error) may still be on their way.
                if let Some(r) = self.reader.take() {
                    r.join().unwrap();
                }
                panic!("run exited early ({status}): {:#?}", self.lines.lock().unwrap());
            }
            assert!(
                started.elapsed() < limit,
                "no streaming with {changes} changes after {limit:?}: {:#?}",
                self.lines
                    .lock()
                    .unwrap()
                    .iter()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for the process to end; its exit status.
    pub fn wait(mut self) -> (std::process::ExitStatus, Vec<serde_json::Value>) {
        let status = self.child.wait().unwrap();
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        let lines = self.lines.lock().unwrap().clone();
        (status, lines)
    }

    /// SIGKILL.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
    }
}

impl Drop for Running {
    /// A test that fails leaves no streaming process behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// Runs `cmd` (a `cutover -f FILE` of the worker): (exit status, its JSON answer).
pub fn cutover(mut cmd: Command) -> (bool, serde_json::Value) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let answer = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .unwrap_or_else(|| panic!("no answer: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.success(), answer)
}

/// A small deterministic generator (xorshift64*), so a failing workload can be replayed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Text that does not compress: TOASTed out of line when long.
    pub fn noise(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        (0..len)
            .map(|_| ALPHABET[self.below(ALPHABET.len() as u64) as usize] as char)
            .collect()
    }

    pub fn name(&mut self) -> Option<String> {
        const NAMES: [&str; 6] = [
            "Zoë",
            "日本語のテキスト",
            "emoji 🎉 outside the BMP",
            "plain",
            "O'Brien \"q\" \\",
            "",
        ];
        match self.below(7) {
            6 => None,
            i => Some(format!("{} {}", NAMES[i as usize], self.below(1000))),
        }
    }
}
