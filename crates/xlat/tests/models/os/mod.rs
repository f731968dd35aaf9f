//! OS models: demand paging and superpages, the Mach 3.0 personality, shadow superpages, kernel
//! time and the kernel's footprint.

mod kernel;
mod mach3;
mod paging;
mod shadow;
mod shadow_regions;
