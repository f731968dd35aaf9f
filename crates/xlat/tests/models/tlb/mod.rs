//! TLBs: entry formats, replacement policies, superpage and subblock TLBs end to end, the
//! software TLB.

mod formats;
mod policies;
mod stlb;
mod superpages;
