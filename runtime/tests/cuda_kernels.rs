//! The runtime's kernel modules on a GPU: every one loads from a cubin built at build
//! time, and what loading its PTX instead (the driver's compiler, what init used to pay) costs.
//!
//! One GPU, one process; `#[ignore]`d. On a GPU machine (the JIT cache off, so PTX loads really
//! compile):
//! `CUDA_CACHE_DISABLE=1 cargo test -p rshmem --test cuda_kernels -- --ignored --nocapture`
//! or, from the bundle, `CUDA_CACHE_DISABLE=1 .gpu/bin/cuda_kernels --ignored --nocapture`.

use rshmem::backend::cuda::image::{self, Form};
use rshmem::driver::context::{self, Device, PrimaryContext};
use rshmem::driver::module::LoadedModule;
use std::time::Instant;

#[test]
#[ignore = "needs a GPU"]
fn every_runtime_kernel_module_loads_from_a_cubin() {
    context::init().expect("CUDA driver");
    let dev = Device::get(0).expect("GPU 0");
    let ctx = PrimaryContext::retain(dev).expect("primary context");
    let cc = dev.compute_capability().unwrap();
    let fits = image::pick(image::CUBIN_ARCHS, cc);
    println!("GPU 0: {} sm_{}{}; cubin used: {fits:?}", dev.name().unwrap(), cc.0, cc.1);
    let (mut cubin_total, mut ptx_total) = (0.0, 0.0);
    for img in image::ALL {
        let t = Instant::now();
        let (module, form) = image::load(&ctx, img, cc).unwrap();
        let cubin_ms = t.elapsed().as_secs_f64() * 1e3;
        drop(module);
        let t = Instant::now();
        let module = LoadedModule::load_ptx(&ctx, img.ptx).unwrap();
        let ptx_ms = t.elapsed().as_secs_f64() * 1e3;
        drop(module);
        println!("{:>9}: loaded as {form:?} in {cubin_ms:8.2} ms; from PTX: {ptx_ms:8.2} ms", img.name);
        cubin_total += cubin_ms;
        ptx_total += ptx_ms;
        if let Some(arch) = fits {
            assert_eq!(form, Form::Cubin(arch), "{}: the driver refused the sm_{arch} cubin", img.name);
        }
    }
    println!("all modules: {cubin_total:.2} ms as loaded, {ptx_total:.2} ms from PTX");
    assert!(fits.is_some(), "this build has no cubin for sm_{}{}: add it to CUBIN_ARCHS in runtime/build.rs", cc.0, cc.1);
}
