//! How a pooled instance's linear memory is put back to its initial
//! contents when the instance ends, chosen once per process by what the
//! kernel offers.
//!
//! `moat serve` makes a fresh instance for every request in a slot of
//! wasmtime's pooling allocator ([`crate::InstancePool`]). When the
//! instance ends, the slot must hold the component's initial memory again
//! before the next request gets it. Two ways, best first:
//!
//! - [`MemoryReset::WrittenPages`]: the pages written since they were last
//!   write-protected are copied back from the component's memory image
//!   (zeroed above it); the rest stays mapped and untouched. The written
//!   pages are found with `PAGEMAP_SCAN` and userfaultfd's asynchronous
//!   write protection (Linux 6.7 and later), through moat's patch of
//!   wasmtime (vendor/README.md), which protects them again only when that
//!   pays: a reset copies at most about twice what one request wrote.
//! - [`MemoryReset::LowestBytes`]: the lowest
//!   [`InstancePool::MEMORY_KEEP_RESIDENT`](crate::InstancePool) bytes are
//!   copied back whether written or not, and memory above them is handed
//!   back to the kernel and faulted in again by the next instance. Where
//!   the kernel is older, or `userfaultfd(2)` is refused (a seccomp filter,
//!   `CONFIG_USERFAULTFD` off).
//!
//! Both give every request a memory no earlier request wrote in
//! (tests/all/serve/isolation.rs); they differ in cost only.

use std::sync::OnceLock;

use crate::options::InstancePool;

/// How a pooled instance's memory is reset (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryReset {
    /// Only the pages the instance wrote are restored.
    WrittenPages,
    /// The lowest bytes of memory are restored, written or not; the rest is
    /// handed back to the kernel.
    LowestBytes,
}

impl MemoryReset {
    /// What this process's kernel allows, found out once (a userfaultfd is
    /// made and closed to ask).
    pub fn available() -> MemoryReset {
        static AVAILABLE: OnceLock<MemoryReset> = OnceLock::new();
        *AVAILABLE.get_or_init(|| {
            if wasmtime::PoolingAllocationConfig::is_pagemap_write_tracking_available() {
                MemoryReset::WrittenPages
            } else {
                MemoryReset::LowestBytes
            }
        })
    }

    /// The name `moat serve` reports it by, on its start-up line and as
    /// the `mode` label of `moat_instance_memory_reset_mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryReset::WrittenPages => "written-pages",
            MemoryReset::LowestBytes => "lowest-bytes",
        }
    }

    /// What it means, for the start-up line.
    pub fn explained(self) -> String {
        match self {
            MemoryReset::WrittenPages => {
                "only written pages are restored (userfaultfd write tracking)".to_owned()
            }
            MemoryReset::LowestBytes => format!(
                "the lowest {} MiB of each instance's memory are restored, written or not \
                 (this kernel or process offers no userfaultfd write tracking)",
                InstancePool::MEMORY_KEEP_RESIDENT >> 20
            ),
        }
    }
}
