//! The GPU a PE runs on and the device state published into CUDA modules.
//!
//! - [`select`]: which device this PE uses (one PE per GPU), and which node-local peers'
//!   memory it reaches by load/store;
//! - [`registry`]: writing the device state into every loaded module that links the device
//!   library (`rshmemi_device_state_d`), and remembering those modules;
//! - [`image`]: the runtime's own kernel modules (PTX and prebuilt cubins) and which form a GPU
//!   loads.

pub mod image;
pub mod registry;
pub mod select;
