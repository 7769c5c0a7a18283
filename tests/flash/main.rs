//! The flash views (forward and backward). Every state here runs the kernel's scalar tier (set
//! for this whole binary), so the snapshots do not depend on the machine's SIMD. Accept
//! snapshot changes with `INSTA_UPDATE=always cargo test --test flash` after checking them.

mod backward;
mod forward;
