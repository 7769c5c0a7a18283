//! Scenes: the built-in lessons, the schema, errors, limits, and the claims their narration
//! makes.

#[path = "../support/mod.rs"]
mod support;

mod builtins;
mod check_limits;
mod claims;
mod claims_backward;
mod errors;
mod real;
mod real_claims;
mod schema;
