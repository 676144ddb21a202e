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
//!   [`MemoryReset::KEEP_RESIDENT`] bytes are
//!   copied back whether written or not, and memory above them is handed
//!   back to the kernel and faulted in again by the next instance. Where
//!   the kernel is older, or `userfaultfd(2)` is refused (a seccomp filter,
//!   `CONFIG_USERFAULTFD` off).
//!
//! Both give every request a memory no earlier request wrote in
//! (tests/all/serve/isolation.rs); they differ in cost only.

use std::sync::OnceLock;

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
    /// Most bytes of a linear memory slot put back to the component's
    /// initial contents in place (copied from its memory image, the rest
    /// zeroed) when an instance ends, rather than handed back with
    /// `madvise` and faulted in again, page by page, by the next instance.
    ///
    /// How the bytes are chosen depends on the mode: with
    /// [`MemoryReset::WrittenPages`], the slot's resident pages are walked
    /// from the bottom, the written ones restored, until this many bytes of
    /// them; the rest of memory is handed back. With
    /// [`MemoryReset::LowestBytes`], the lowest this many bytes, written
    /// or not, and the rest handed back. Either way a slot keeps at most
    /// this much of its own memory resident between instances.
    ///
    /// 16 MiB: a JavaScript handler (componentize-js) starts with a few
    /// MiB of heap and a Python one (componentize-py) with tens, and each
    /// writes much of it on every request, so the faults and `madvise`
    /// were three quarters of a JavaScript request's CPU (BENCHMARKS.md,
    /// "Handlers from every language"). Copying the lowest bytes took
    /// JavaScript from about 2,260 to 3,230 requests a second a core and
    /// Python from 390 to 660 (32 MiB: 715; 64 MiB: 600, the copy then
    /// outweighing the faults). Restoring only written pages, the copy is
    /// what the request wrote, and the bound is on what stays resident: a
    /// handler whose requests write different pages each time keeps at
    /// most 16 MiB of them, within what the pool's instances could hold
    /// at once anyway.
    pub(crate) const KEEP_RESIDENT: usize = 16 << 20;

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
                Self::KEEP_RESIDENT >> 20
            ),
        }
    }
}
