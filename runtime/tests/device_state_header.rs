//! The generated C header matches `runtime/src/device_state.rs`, and C lays the struct out as
//! Rust does.
//!
//! `triton-lib/include/rshmem/device_state.h` is committed; this test regenerates it with
//! cbindgen and fails on any difference. `RSHMEM_BLESS=1` rewrites the file instead. The layout
//! check compiles `_Static_assert`s of every size and offset (the values Rust computes) with
//! clang-19, for the host and for `nvptx64-nvidia-cuda`, the target device code is built for.

use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use rshmem::device_state::{DeviceState, ErrorRecord, ProxyDesc, ProxyRing, TeamDesc};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn header_path() -> PathBuf {
    manifest_dir().join("../triton-lib/include/rshmem/device_state.h")
}

fn generate() -> String {
    let dir = manifest_dir();
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml"))
        .unwrap_or_else(|e| panic!("cannot read runtime/cbindgen.toml: {e}"));
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/consts.rs"))
        .with_src(dir.join("src/device_state.rs"))
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen failed on device_state.rs/consts.rs: {e}"));
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}

#[test]
fn header_is_up_to_date() {
    let fresh = generate();
    assert!(fresh.starts_with("/* Generated"), "line 1 must say the file is generated");
    let path = header_path();
    if std::env::var_os("RSHMEM_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{} is stale (or missing): it differs from what cbindgen makes of runtime/src/device_state.rs. \
         Regenerate it with `RSHMEM_BLESS=1 cargo test -p rshmem --test device_state_header` and commit it.",
        path.display()
    );
}

/// `(C expression, value Rust computes)` for every size and offset.
fn layout_facts() -> Vec<(String, usize)> {
    let mut facts = Vec::new();
    macro_rules! fields {
        ($ty:ty, $cname:literal, [$($f:ident),* $(,)?]) => {
            facts.push((format!("sizeof({})", $cname), size_of::<$ty>()));
            facts.push((format!("_Alignof({})", $cname), std::mem::align_of::<$ty>()));
            $(facts.push((format!("offsetof({}, {})", $cname, stringify!($f)), offset_of!($ty, $f)));)*
        };
    }
    fields!(DeviceState, "rshmemi_device_state_t", [
        magic, version, my_pe, n_pes, node_size, my_slot, flags, stop_delay_ms, heap_base,
        heap_stride, heap_bound, team_table, barrier_ws, coll_ws, coll_ws_size,
        debug_wait_timeout_ns, error_buf, proxy_ring, proxy_head, peer_left, pe_slot,
    ]);
    fields!(TeamDesc, "rshmemi_team_desc_t", [start, stride, size, my_index]);
    fields!(ErrorRecord, "rshmemi_error_record_t", [flag, pe, addr, cmp, expected, seen, missing]);
    fields!(ProxyDesc, "rshmemi_proxy_desc_t", [seq, dest, source, nbytes, sig_addr, value, value2, kind, sub, width, flags, pe]);
    fields!(ProxyRing, "rshmemi_proxy_ring_t", [tail, quieted, failed, reserved]);
    facts.push(("RSHMEM_MAX_PES".into(), rshmem::device_state::MAX_PES));
    facts.push(("RSHMEM_MAX_TEAMS".into(), rshmem::consts::MAX_TEAMS));
    facts
}

fn check_with_clang(dir: &Path, target: &str) {
    let mut src = String::from("#include <stddef.h>\n#include \"rshmem/device_state.h\"\n");
    for (expr, value) in layout_facts() {
        src.push_str(&format!("_Static_assert({expr} == {value}, \"{expr} must be {value} as in Rust\");\n"));
    }
    let file = dir.join(format!("layout_{}.c", target.replace('-', "_")));
    std::fs::write(&file, src).expect("write the layout check");
    let include = manifest_dir().join("../triton-lib/include");
    let out = Command::new("clang-19")
        .args(["-fsyntax-only", "-ffreestanding", "-std=c11", "-Werror"])
        .arg(format!("--target={target}"))
        .arg("-I")
        .arg(&include)
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run clang-19 (install clang-19 to check the header's layout): {e}"));
    assert!(
        out.status.success(),
        "C lays out device_state.h differently from Rust for {target}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn c_layout_matches_rust() {
    let dir = std::env::temp_dir().join(format!("rshmem-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    check_with_clang(&dir, "x86_64-unknown-linux-gnu");
    check_with_clang(&dir, "nvptx64-nvidia-cuda");
    let _ = std::fs::remove_dir_all(&dir);
}
