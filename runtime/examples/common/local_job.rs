//! The launcher the measuring examples share (`init_time`, `coll_time`, `net_bench`): the program
//! re-runs itself as the PEs of one job on this machine, bootstrapped over loopback as torchrun
//! would start them, and waits for them. Included with `#[path]`, so it is no example itself.

use std::process::Command;

/// Re-runs this program as `n` PEs: each child gets `child` set to 1 (how it knows it is a PE),
/// `args`, the launcher's variables of a job of `n` PEs on one host with a fresh bootstrap port
/// and secret (`tag` names the secret), and `env`. Returns 0 when every PE exited 0, else 1.
pub fn spawn_pes(n: usize, child: &str, tag: &str, args: &[String], env: &[(&str, String)]) -> i32 {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        l.local_addr().expect("local address").port()
    };
    let exe = std::env::current_exe().expect("own path");
    let secret = format!("{tag}-{}-{port}", std::process::id());
    let mut children: Vec<_> = (0..n)
        .map(|pe| {
            Command::new(&exe)
                .args(args)
                .env(child, "1")
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.saturating_sub(1).to_string())
                .env("RSHMEM_BOOTSTRAP_PORT", port.to_string())
                .env("RSHMEM_BOOTSTRAP_SECRET", &secret)
                .env("RANK", pe.to_string())
                .env("WORLD_SIZE", n.to_string())
                .env("LOCAL_RANK", pe.to_string())
                .env("LOCAL_WORLD_SIZE", n.to_string())
                .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .spawn()
                .expect("spawn a PE")
        })
        .collect();
    let mut status = 0;
    for (pe, c) in children.iter_mut().enumerate() {
        match c.wait() {
            Ok(s) if s.success() => {}
            Ok(s) => {
                eprintln!("PE {pe} ended with {s}");
                status = 1;
            }
            Err(e) => {
                eprintln!("PE {pe}: wait failed: {e}");
                status = 1;
            }
        }
    }
    status
}
