//! Gives librshmem.so a soname, so programs linked against it record the ABI they were built
//! for: `librshmem.so.<major>`, or `librshmem.so.0.<minor>` while the version is 0.x (where a
//! minor release may change the ABI). `scripts/install_c.sh` installs the file under that name
//! with the usual links.

fn main() {
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("cargo sets {k}"));
    let major = var("CARGO_PKG_VERSION_MAJOR");
    let soname = if major == "0" {
        format!("librshmem.so.0.{}", var("CARGO_PKG_VERSION_MINOR"))
    } else {
        format!("librshmem.so.{major}")
    };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    println!("cargo:rustc-env=RSHMEM_SONAME={soname}");
}
