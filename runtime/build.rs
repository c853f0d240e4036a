//! Builds the runtime's own GPU kernels: PTX from `triton-lib/src/runtime_kernels.cu` (clang-19),
//! then a cubin of every kernel module for each architecture of [`CUBIN_ARCHS`] (ptxas).
//!
//! The kernels (barrier, small fcollects and reductions on a stream, and the cuda backend's
//! one-thread kernels: host atomics, the stream signal add) are CUDA C++ built from the device
//! library's headers, so they share its memory-ordering code and barrier words. clang-19
//! compiles them as CUDA device code without any CUDA installation (`-nocudainc -nocudalib`).
//!
//! Why cubins: the driver compiles PTX when a module is loaded, which took 0.03 s (barrier),
//! 0.4 s (fcollect) and 1.7 s (reductions) per module with ptxas for sm_90. With cubins, init
//! loads every module at once and pays no compilation, so no kernel module is ever loaded later
//! (a load may wait on running kernels, and must not happen inside CUDA graph capture). A GPU
//! with no matching cubin (another architecture, or a build without ptxas) loads the PTX, which
//! the driver compiles at init then.
//!
//! Outputs in `$OUT_DIR`: `<module>.ptx`, `<module>.sm_<arch>.cubin`, and `kernel_images.rs`,
//! which `runtime/src/backend/cuda/image.rs` includes (one `KernelImage` per module).
//!
//! clang is `$RSHMEM_CLANG` if set, else `clang-19` on `PATH`, else `/usr/lib/llvm-19/bin/clang`.
//! ptxas is `$RSHMEM_PTXAS` if set (empty: build no cubins), else `ptxas` on `PATH`, else
//! `/usr/local/cuda/bin/ptxas`, else the one in the Triton wheel of the Python environment
//! (`$RSHMEM_VENV`, `$VIRTUAL_ENV`, `$PYO3_PYTHON`, the workspace's `.venv`, `python3`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Oldest architecture the PTX targets: sm_80 (A100), with PTX ISA 8.0 (CUDA 12.0 drivers and
/// newer). The copy loops use cache-eviction qualifiers (`ld.global.L1::no_allocate`, PTX ISA
/// 7.4); PTX 7.0 made the driver refuse the module (CUDA_ERROR_INVALID_PTX, seen on H200).
/// The driver compiles the PTX for any newer GPU.
const ARCH: &str = "sm_80";
const PTX_FEATURE: &str = "+ptx80";

/// The architectures every kernel module is assembled for (`sm_<n>`): the one list to extend.
/// A cubin runs on its architecture and on later minor versions of the same major one (sm_80 on
/// sm_86 and sm_89), so each entry is the oldest GPU of its kind worth a tuned build.
const CUBIN_ARCHS: [u32; 4] = [80, 89, 90, 100];

/// The kernel modules built from `runtime_kernels.cu`: (module name, macro that selects it).
const CU_MODULES: [(&str, &str); 4] = [
    ("barrier", "RSHMEMI_RT_BARRIER"),
    ("fcollect", "RSHMEMI_RT_FCOLLECT"),
    ("reduce", "RSHMEMI_RT_REDUCE"),
    ("ops", "RSHMEMI_RT_OPS"),
];

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let lib = manifest.join("..").join("triton-lib");
    let src = lib.join("src").join("runtime_kernels.cu");
    // A directory is scanned for any change inside it.
    println!("cargo:rerun-if-changed={}", lib.join("src").display());
    println!("cargo:rerun-if-changed={}", lib.join("include").display());
    for var in ["RSHMEM_CLANG", "RSHMEM_PTXAS", "RSHMEM_VENV", "VIRTUAL_ENV", "PYO3_PYTHON"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if !src.exists() {
        fail(&format!("{} is missing; the rshmem runtime needs the triton-lib/ folder beside runtime/", src.display()));
    }
    let clang = find_clang();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut modules: Vec<(&str, PathBuf)> = Vec::new();
    for (name, part) in CU_MODULES {
        let ptx = out_dir.join(format!("{name}.ptx"));
        compile(&clang, &lib, &src, part, &ptx);
        modules.push((name, ptx));
    }

    let ptxas = find_ptxas(&manifest);
    let mut built: Vec<(&str, u32, PathBuf)> = Vec::new();
    match &ptxas {
        Some(ptxas) => built = assemble_all(ptxas, &modules, &out_dir),
        None => println!(
            "cargo:warning=rshmem: no ptxas found (set RSHMEM_PTXAS, or install triton or the CUDA toolkit); \
             the runtime's kernels are built as PTX only, which the driver compiles at init (about 2 s)"
        ),
    }
    let rs = images_rs(&modules, &built);
    std::fs::write(out_dir.join("kernel_images.rs"), rs)
        .unwrap_or_else(|e| fail(&format!("cannot write kernel_images.rs: {e}")));
}

fn compile(clang: &Path, lib: &Path, src: &Path, part: &str, out: &Path) {
    let output = Command::new(clang)
        .args(["-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib"])
        .arg(format!("--cuda-gpu-arch={ARCH}"))
        .arg(format!("--cuda-feature={PTX_FEATURE}"))
        .args(["-O3", "-std=c++17", "-fwrapv", "-Wall", "-Werror", "-Wno-unknown-cuda-version"])
        .arg(format!("-D{part}"))
        // The runtime's kernels are launched with known, small blocks (barrier_device.h).
        .arg("-DRSHMEM_BARRIER_NAMES_MISSING=1")
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

/// Assembles every (module, architecture) pair, a few at a time (reductions take ~2 s each);
/// returns those built. An architecture this ptxas does not know is skipped with a warning (its
/// GPUs load the PTX); any other failure fails the build, since it means the PTX is wrong.
fn assemble_all<'a>(ptxas: &Path, modules: &[(&'a str, PathBuf)], out_dir: &Path) -> Vec<(&'a str, u32, PathBuf)> {
    let jobs: Vec<(&str, u32, &Path, PathBuf)> = modules
        .iter()
        .flat_map(|(name, ptx)| {
            CUBIN_ARCHS.iter().map(move |&arch| (*name, arch, ptx.as_path(), out_dir.join(format!("{name}.sm_{arch}.cubin"))))
        })
        .collect();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).min(jobs.len()).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(usize, Result<(), String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((_, arch, ptx, cubin)) = jobs.get(i) else { break };
                        done.push((i, assemble(ptxas, ptx, *arch, cubin)));
                    }
                    done
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a ptxas worker panicked")).collect()
    });
    let mut built = Vec::new();
    let mut skipped = std::collections::BTreeSet::new();
    for (i, result) in results {
        let (name, arch, _, cubin) = &jobs[i];
        match result {
            Ok(()) => built.push((*name, *arch, cubin.clone())),
            Err(msg) if msg.contains("Unsupported gpu architecture") || msg.contains("is not defined for option") => {
                skipped.insert(*arch);
            }
            Err(msg) => fail(&format!("{} failed on {name} for sm_{arch}:\n{msg}", ptxas.display())),
        }
    }
    for arch in skipped {
        println!("cargo:warning=rshmem: {} cannot build sm_{arch}; those GPUs load the PTX", ptxas.display());
    }
    built.sort_by_key(|(name, arch, _)| (modules.iter().position(|(n, _)| n == name), *arch));
    built
}

fn assemble(ptxas: &Path, ptx: &Path, arch: u32, cubin: &Path) -> Result<(), String> {
    let out = Command::new(ptxas)
        .args(["-O3", "--gpu-name", &format!("sm_{arch}"), "-o"])
        .arg(cubin)
        .arg(ptx)
        .output()
        .map_err(|e| format!("could not run it: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `kernel_images.rs`: one `KernelImage` constant per module, upper-case name.
fn images_rs(modules: &[(&str, PathBuf)], built: &[(&str, u32, PathBuf)]) -> String {
    let mut rs = String::from("// Generated by runtime/build.rs; do not edit.\n");
    let archs: Vec<String> = CUBIN_ARCHS.iter().map(u32::to_string).collect();
    writeln!(rs, "/// The architectures `build.rs` assembles cubins for (`sm_<n>`).").unwrap();
    writeln!(rs, "pub const CUBIN_ARCHS: [u32; {}] = [{}];", archs.len(), archs.join(", ")).unwrap();
    for (name, ptx) in modules {
        let upper = name.to_uppercase();
        writeln!(rs, "/// The `{name}` kernel module.").unwrap();
        writeln!(rs, "pub static {upper}: KernelImage = KernelImage {{").unwrap();
        writeln!(rs, "    name: {name:?},").unwrap();
        writeln!(rs, "    ptx: include_str!({:?}),", ptx.display().to_string()).unwrap();
        writeln!(rs, "    cubins: &[").unwrap();
        for (_, arch, cubin) in built.iter().filter(|(n, _, _)| n == name) {
            writeln!(rs, "        ({arch}, &Aligned(*include_bytes!({:?}))),", cubin.display().to_string()).unwrap();
        }
        writeln!(rs, "    ],\n}};").unwrap();
    }
    rs
}

/// `$RSHMEM_CLANG`, else clang-19 on `PATH`, else the Debian/Ubuntu LLVM 19 location.
fn find_clang() -> PathBuf {
    if let Some(c) = std::env::var_os("RSHMEM_CLANG").filter(|c| !c.is_empty()) {
        return PathBuf::from(c);
    }
    if let Some(c) = on_path("clang-19") {
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

/// The ptxas to assemble cubins with, or `None` for a PTX-only build (see the file docs).
fn find_ptxas(manifest: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RSHMEM_PTXAS") {
        if p.is_empty() {
            return None;
        }
        let p = PathBuf::from(p);
        if !p.is_file() {
            fail(&format!("RSHMEM_PTXAS={} is not a file; point it at a ptxas binary, or set it empty", p.display()));
        }
        return Some(p);
    }
    if let Some(p) = on_path("ptxas") {
        return Some(p);
    }
    let toolkit = PathBuf::from("/usr/local/cuda/bin/ptxas");
    if toolkit.is_file() {
        return Some(toolkit);
    }
    triton_ptxas(manifest)
}

/// Triton's wheel ships a ptxas (`triton/backends/nvidia/bin/ptxas`); found without importing
/// triton, through the first Python that knows where the package lives.
fn triton_ptxas(manifest: &Path) -> Option<PathBuf> {
    let venv_python = |dir: std::ffi::OsString| PathBuf::from(dir).join("bin").join("python");
    let mut pythons: Vec<PathBuf> = Vec::new();
    pythons.extend(std::env::var_os("RSHMEM_VENV").map(venv_python));
    pythons.extend(std::env::var_os("VIRTUAL_ENV").map(venv_python));
    pythons.extend(std::env::var_os("PYO3_PYTHON").map(PathBuf::from));
    pythons.push(manifest.join("..").join(".venv").join("bin").join("python"));
    pythons.push(PathBuf::from("python3"));
    const FIND: &str = "import importlib.util as u, os; s = u.find_spec('triton'); \
                        print(os.path.join(s.submodule_search_locations[0], 'backends', 'nvidia', 'bin', 'ptxas'))";
    pythons.iter().find_map(|py| {
        let out = Command::new(py).args(["-c", FIND]).output().ok()?;
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        (out.status.success() && path.is_file()).then_some(path)
    })
}

fn on_path(exe: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(exe)).find(|c| c.is_file()))
}

fn fail(msg: &str) -> ! {
    eprintln!("error: rshmem build: {msg}");
    std::process::exit(1)
}
