//! `attnviz kv-cache` and `attnviz memory`.

use crate::cli::{KvCacheArgs, MemoryArgs};

pub fn kv_cache(_args: &KvCacheArgs) -> crate::Result<()> {
    Err(super::not_yet("kv-cache"))
}

pub fn memory(_args: &MemoryArgs) -> crate::Result<()> {
    Err(super::not_yet("memory"))
}
