//! OS models: demand paging and superpages, the Mach 3.0 personality, shadow superpages.

mod mach3;
mod paging;
mod shadow;
mod shadow_regions;
