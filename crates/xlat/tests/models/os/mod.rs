//! OS models: demand paging and superpages, the page cache and copy on write, the Mach 3.0
//! personality, shadow superpages.

mod mach3;
mod paging;
mod pcache;
mod shadow;
mod shadow_regions;
