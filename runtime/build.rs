//! Compiles the runtime's own GPU kernels (`triton-lib/src/runtime_kernels.cu`) to PTX.
//!
//! The kernels (barrier and reduction on a stream) are CUDA C++ built from the device library's
//! headers, so they share its memory-ordering code and barrier words. clang-19 compiles them
//! as CUDA device code without any CUDA installation (`-nocudainc -nocudalib`); the PTX goes to
//! `$OUT_DIR` and `runtime/src/runtime/kernels.rs` embeds it with `include_str!`. At run time
//! the driver JIT-compiles it for the GPU, so no compiler is needed where the binary runs.
//!
//! Two PTX files come out of the one source: the barrier (small, loaded at every init) and the
//! reductions (every operator and dtype, loaded on first use).
//!
//! clang is `$RSHMEM_CLANG` if set, else `clang-19` on `PATH`, else `/usr/lib/llvm-19/bin/clang`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Oldest architecture the PTX targets: sm_80 (A100), with PTX ISA 8.0 (CUDA 12.0 drivers and
/// newer). The copy loops use cache-eviction qualifiers (`ld.global.L1::no_allocate`, PTX ISA
/// 7.4); PTX 7.0 made the driver refuse the module (CUDA_ERROR_INVALID_PTX, seen on H200).
/// The driver compiles the PTX for any newer GPU.
const ARCH: &str = "sm_80";
const PTX_FEATURE: &str = "+ptx80";

/// (macro that selects the kernels, output file).
const PARTS: [(&str, &str); 3] = [
    ("RSHMEMI_RT_BARRIER", "rt_barrier.ptx"),
    ("RSHMEMI_RT_FCOLLECT", "rt_fcollect.ptx"),
    ("RSHMEMI_RT_REDUCE", "rt_reduce.ptx"),
];

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let lib = manifest.join("..").join("triton-lib");
    let src = lib.join("src").join("runtime_kernels.cu");
    // A directory is scanned for any change inside it.
    println!("cargo:rerun-if-changed={}", lib.join("src").display());
    println!("cargo:rerun-if-changed={}", lib.join("include").display());
    println!("cargo:rerun-if-env-changed=RSHMEM_CLANG");
    if !src.exists() {
        fail(&format!("{} is missing; the rshmem runtime needs the triton-lib/ folder beside runtime/", src.display()));
    }
    let clang = find_clang();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for (part, file) in PARTS {
        compile(&clang, &lib, &src, part, &out_dir.join(file));
    }
}

fn compile(clang: &Path, lib: &Path, src: &Path, part: &str, out: &Path) {
    let output = Command::new(clang)
        .args(["-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib"])
        .arg(format!("--cuda-gpu-arch={ARCH}"))
        .arg(format!("--cuda-feature={PTX_FEATURE}"))
        .args(["-O3", "-std=c++17", "-fwrapv", "-Wall", "-Werror", "-Wno-unknown-cuda-version"])
        .arg(format!("-D{part}"))
        .arg("-I")
        .arg(lib.join("include"))
        .arg("-I")
        .arg(lib.join("src"))
        .arg("-S")
        .arg(src)
        .arg("-o")
        .arg(out)
        .output();
    match output {
        Ok(o) if o.status.success() => {}
        Ok(o) => fail(&format!(
            "{} failed ({}) compiling {} with -D{part}:\n{}",
            clang.display(),
            o.status,
            src.display(),
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => fail(&format!("could not run {}: {e}", clang.display())),
    }
}

/// `$RSHMEM_CLANG`, else clang-19 on `PATH`, else the Debian/Ubuntu LLVM 19 location.
fn find_clang() -> PathBuf {
    if let Some(c) = std::env::var_os("RSHMEM_CLANG").filter(|c| !c.is_empty()) {
        return PathBuf::from(c);
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("clang-19")).find(|c| c.is_file()))
        .unwrap_or_default();
    if let Some(c) = on_path {
        return c;
    }
    let debian = PathBuf::from("/usr/lib/llvm-19/bin/clang");
    if debian.is_file() {
        return debian;
    }
    fail(
        "clang-19 was not found. rshmem compiles its GPU kernels (triton-lib/src/runtime_kernels.cu) to \
         PTX with clang 19 at build time. Install it (Debian/Ubuntu: `apt-get install clang-19`; or \
         https://apt.llvm.org) or set RSHMEM_CLANG to a clang 19 binary.",
    )
}

fn fail(msg: &str) -> ! {
    eprintln!("error: rshmem build: {msg}");
    std::process::exit(1)
}
