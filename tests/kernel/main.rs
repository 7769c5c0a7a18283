//! The engine and the fp32 kernels against the f64 reference: forward, backward, decode,
//! variants, traces and numeric extremes.

mod kernel_cases;

mod backward;
mod backward_autograd;
mod engine_decode;
mod engine_properties;
mod engine_variants;
mod numeric_extremes;
mod trace;
mod vs_reference;
