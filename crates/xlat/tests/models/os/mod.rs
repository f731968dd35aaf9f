//! OS models: demand paging and superpages, the page cache and copy on write (also under page
//! reservation), the Mach 3.0 personality, shadow superpages, kernel time and the kernel's
//! footprint, the TLB flush at a fork.

mod fork_flush;
mod kernel;
mod mach3;
mod paging;
mod pcache;
mod pcache_resv;
mod shadow;
mod shadow_regions;
