//! Multi-process test harness: a `#[test]` re-runs its own test binary once per PE.
//!
//! ```ignore
//! #[test]
//! fn allgather_4() {
//!     Pes::new("allgather_4", 4).run(|pe, n| { /* runs in each child process */ });
//! }
//! ```
//! In the parent, `run` picks a free loopback port and a random secret, starts `n` children with
//! the torchrun variables (`MASTER_ADDR`, `RSHMEM_BOOTSTRAP_PORT`, `RANK`, `WORLD_SIZE`,
//! `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `RSHMEM_BOOTSTRAP_SECRET`), waits with a deadline, and fails
//! with every child's output if one exits badly or the deadline passes (children are killed, so
//! a hang fails the test instead of hanging CI). In a child, `run` calls the body.
#![allow(dead_code)]

pub mod rng;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_VAR: &str = "RSHMEM_TEST_CHILD";

/// What a PE's process must end with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Exit status 0.
    Success,
    /// Any exit status or signal (e.g. a PE the test kills on purpose).
    Any,
    /// This exact status.
    Code(i32),
}

/// A multi-PE test.
pub struct Pes {
    name: &'static str,
    n: usize,
    env: Vec<(String, String)>,
    exits: Vec<Exit>,
    deadline: Duration,
}

impl Pes {
    /// `name` must be the `#[test]` function's name (the filter that re-selects it).
    pub fn new(name: &'static str, n: usize) -> Self {
        Pes {
            name,
            n,
            env: vec![("RSHMEM_BOOTSTRAP_TIMEOUT_S".into(), "30".into())],
            exits: vec![Exit::Success; n],
            deadline: Duration::from_secs(90),
        }
    }

    /// Sets a variable in every child.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Expects `pe` to end with `exit`.
    pub fn exit(mut self, pe: usize, exit: Exit) -> Self {
        self.exits[pe] = exit;
        self
    }

    /// The whole test must end within this.
    pub fn deadline(mut self, d: Duration) -> Self {
        self.deadline = d;
        self
    }

    /// This PE's number inside a child, `None` in the parent.
    pub fn child_pe() -> Option<usize> {
        std::env::var(CHILD_VAR).ok()?;
        std::env::var("RANK").ok()?.parse().ok()
    }

    /// In a child: runs `body(pe, n)`. In the parent: spawns the children and checks them.
    pub fn run(self, body: impl FnOnce(usize, usize)) {
        if std::env::var(CHILD_VAR).as_deref() == Ok(self.name) {
            let pe = std::env::var("RANK").unwrap().parse().unwrap();
            body(pe, self.n);
            return;
        }
        self.spawn_and_check();
    }

    fn spawn_and_check(self) {
        let port = free_port();
        let mut secret = [0u8; 8];
        std::fs::File::open("/dev/urandom").unwrap().read_exact(&mut secret).unwrap();
        let secret: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let exe = std::env::current_exe().unwrap();
        let mut children: Vec<Child> = (0..self.n)
            .map(|pe| {
                let mut cmd = Command::new(&exe);
                // --include-ignored: an #[ignore]d test (GPU) run with --ignored must run its body in the children too.
                cmd.args(["--exact", self.name, "--nocapture", "--test-threads=1", "--include-ignored"])
                    .env(CHILD_VAR, self.name)
                    .env("MASTER_ADDR", "127.0.0.1")
                    .env("MASTER_PORT", (port - 1).to_string())
                    .env("RSHMEM_BOOTSTRAP_PORT", port.to_string())
                    .env("RSHMEM_BOOTSTRAP_SECRET", &secret)
                    .env("RANK", pe.to_string())
                    .env("WORLD_SIZE", self.n.to_string())
                    .env("LOCAL_RANK", pe.to_string())
                    .env("LOCAL_WORLD_SIZE", self.n.to_string())
                    .env("RSHMEM_BACKEND", "host")
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                for (k, v) in &self.env {
                    cmd.env(k, v);
                }
                cmd.spawn().expect("spawn PE process")
            })
            .collect();
        // Drain pipes on threads so a chatty child cannot block on a full pipe.
        let outputs: Vec<_> = children
            .iter_mut()
            .map(|c| {
                let mut out = c.stdout.take().unwrap();
                let mut err = c.stderr.take().unwrap();
                std::thread::spawn(move || {
                    let mut s = String::new();
                    let _ = out.read_to_string(&mut s);
                    let mut e = String::new();
                    let _ = err.read_to_string(&mut e);
                    s + &e
                })
            })
            .collect();
        let start = Instant::now();
        let mut status = vec![None; self.n];
        while status.iter().any(Option::is_none) && start.elapsed() < self.deadline {
            for (i, c) in children.iter_mut().enumerate() {
                if status[i].is_none() {
                    status[i] = c.try_wait().unwrap();
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let timed_out = status.iter().any(Option::is_none);
        for c in children.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let logs: Vec<String> = outputs.into_iter().map(|h| h.join().unwrap()).collect();
        let mut problems = Vec::new();
        if timed_out {
            problems.push(format!("deadline of {:?} passed (a hang)", self.deadline));
        }
        for (pe, st) in status.iter().enumerate() {
            let Some(st) = st else { continue };
            let ok = match self.exits[pe] {
                Exit::Success => st.success(),
                Exit::Any => true,
                Exit::Code(c) => st.code() == Some(c),
            };
            if !ok {
                problems.push(format!("PE {pe} ended with {st}, expected {:?}", self.exits[pe]));
            }
        }
        if !problems.is_empty() {
            let mut msg = problems.join("\n");
            for (pe, log) in logs.iter().enumerate() {
                msg += &format!("\n----- PE {pe} output -----\n{log}");
            }
            panic!("{msg}");
        }
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    if port < 1025 {
        free_port()
    } else {
        port
    }
}
