//! Page tables: every kind's walks and sizes, superpage and partial-subblock PTEs, parameters,
//! talluri95's Table 2 formulas.

mod clustered;
mod hashed;
mod linear;
mod params;
mod props;
mod radix;
mod superpage;
mod superpage_props;
mod superpage_tree;
mod table2;
