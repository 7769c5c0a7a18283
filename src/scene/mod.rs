//! Scene files: schema (serde), loading, validation with line:column errors.
