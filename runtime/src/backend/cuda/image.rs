//! The runtime's kernel modules as built into the crate, and which form a GPU loads.
//!
//! `runtime/build.rs` compiles each module (barrier, fcollect, reduce from
//! `triton-lib/src/runtime_kernels.cu`; the backend's `ops`) to PTX and assembles a cubin of it
//! for each architecture of [`CUBIN_ARCHS`]. A GPU loads the cubin of its architecture, else
//! the newest one of the same major architecture and a lower minor one (a cubin runs on later
//! minor versions of its major architecture: CUDA's binary compatibility), else the PTX, which
//! the driver compiles when loading (seconds for the reductions). A cubin the driver refuses
//! falls back to the PTX too, with a warning.
//!
//! # References
//! <https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#binary-compatibility>

use crate::driver::context::PrimaryContext;
use crate::driver::module::LoadedModule;
use crate::error::Result;
use std::sync::Arc;

/// Bytes aligned to 16, as the driver reads an ELF image in place (`include_bytes!` alone only
/// guarantees byte alignment).
#[repr(C, align(16))]
pub struct Aligned<B: ?Sized>(pub B);

/// One kernel module: its PTX and the cubins built for it.
pub struct KernelImage {
    /// The module's name, for messages.
    pub name: &'static str,
    /// PTX text (sm_80 or older ISA), for any GPU.
    pub ptx: &'static str,
    /// `(architecture, cubin)`, architecture `n` meaning sm_n.
    pub cubins: &'static [(u32, &'static Aligned<[u8]>)],
}

impl std::fmt::Debug for KernelImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let archs: Vec<u32> = self.cubins.iter().map(|(a, _)| *a).collect();
        f.debug_struct("KernelImage").field("name", &self.name).field("cubins", &archs).finish_non_exhaustive()
    }
}

include!(concat!(env!("OUT_DIR"), "/kernel_images.rs"));

/// Every runtime kernel module.
pub static ALL: [&KernelImage; 4] = [&BARRIER, &FCOLLECT, &REDUCE, &OPS];

/// What a GPU loaded of a [`KernelImage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The cubin built for sm_n.
    Cubin(u32),
    /// The PTX, compiled by the driver at load time.
    Ptx,
}

/// The architecture whose cubin a GPU of compute capability `major.minor` runs, among `archs`.
pub fn pick(archs: impl IntoIterator<Item = u32>, (major, minor): (i32, i32)) -> Option<u32> {
    let (major, minor) = (u32::try_from(major).ok()?, u32::try_from(minor).ok()?);
    // sm_100 is (10, 0), sm_89 (8, 9): major * 10 + minor, for minors below 10 (all so far).
    archs.into_iter().filter(|&a| a / 10 == major && a % 10 <= minor).max()
}

/// Loads `image` into `ctx` for a GPU of compute capability `cc`: its cubin when one fits and
/// the driver takes it, else the PTX.
///
/// # Errors
/// [`crate::Error::Driver`] when the driver refuses the PTX as well.
pub fn load(ctx: &Arc<PrimaryContext>, image: &KernelImage, cc: (i32, i32)) -> Result<(LoadedModule, Form)> {
    if let Some(arch) = pick(image.cubins.iter().map(|(a, _)| *a), cc) {
        let (_, cubin) = image.cubins.iter().find(|(a, _)| *a == arch).expect("picked from this list");
        match LoadedModule::load_cubin(ctx, &cubin.0) {
            Ok(m) => return Ok((m, Form::Cubin(arch))),
            Err(e) => tracing::warn!(
                module = image.name,
                arch,
                error = %e,
                "the driver refused the cubin; compiling the PTX instead (slower init)"
            ),
        }
    }
    Ok((LoadedModule::load_ptx(ctx, image.ptx)?, Form::Ptx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_takes_its_own_architecture_else_an_older_minor_of_its_major() {
        let built = [80, 89, 90, 100];
        assert_eq!(pick(built, (8, 0)), Some(80));
        assert_eq!(pick(built, (8, 6)), Some(80), "sm_86 runs sm_80 code");
        assert_eq!(pick(built, (8, 9)), Some(89));
        assert_eq!(pick(built, (9, 0)), Some(90));
        assert_eq!(pick(built, (10, 0)), Some(100));
        assert_eq!(pick(built, (10, 3)), Some(100));
        assert_eq!(pick(built, (12, 0)), None, "no sm_12x cubin: PTX");
        assert_eq!(pick(built, (7, 5)), None);
        assert_eq!(pick([90], (8, 9)), None, "a newer major never runs on an older GPU");
        assert_eq!(pick([], (9, 0)), None);
        assert_eq!(pick(built, (-1, 0)), None);
    }

    #[test]
    fn every_module_has_ptx_and_cubins_are_elf_images() {
        for image in ALL {
            assert!(image.ptx.contains(".entry ") && image.ptx.contains(".version "), "{}", image.name);
            assert!(!image.ptx.contains('\0'), "{}", image.name);
            for (arch, cubin) in image.cubins {
                assert!(CUBIN_ARCHS.contains(arch), "{} sm_{arch}", image.name);
                assert!(cubin.0.starts_with(b"\x7fELF"), "{} sm_{arch}", image.name);
                assert_eq!(cubin.0.as_ptr() as usize % 16, 0, "aligned");
            }
        }
    }

    /// With `RSHMEM_REQUIRE_CUBINS=1` (CI sets it, as it has Triton's ptxas), a build that fell
    /// back to PTX only is an error: every module must carry a cubin for every architecture.
    #[test]
    fn cubins_were_built_when_required() {
        if std::env::var("RSHMEM_REQUIRE_CUBINS").as_deref() != Ok("1") {
            return;
        }
        for image in ALL {
            let archs: Vec<u32> = image.cubins.iter().map(|(a, _)| *a).collect();
            assert_eq!(archs, CUBIN_ARCHS, "{}: cubins for {archs:?}", image.name);
        }
    }
}
