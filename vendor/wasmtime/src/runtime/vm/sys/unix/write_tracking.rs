//! Tracking which pages of a linear memory or table were written since they
//! were last reset, with userfaultfd's asynchronous write protection (Linux
//! 6.7 and later).
//!
//! Without it, `PAGEMAP_SCAN`'s `WRITTEN` category means only "not
//! write-protected by userfaultfd", which is true of every page that was ever
//! written: after the first reset, every page the guest ever touched is
//! reported, and reset, again on every later reset. With a range registered
//! for write protection in asynchronous mode (`UFFD_FEATURE_WP_ASYNC`), the
//! kernel resolves a write to a protected page itself, with no message to any
//! reader, by clearing the page's protection bit; `PAGEMAP_SCAN` then reports
//! exactly the pages written since they were last protected, and the same
//! ioctl with `PM_SCAN_WP_MATCHING` protects them again.
//!
//! The protocol, per reset of a range (see `reset_with_pagemap`):
//!
//! 1. scan the range for written pages and reset those in place;
//! 2. if the slot's [`WriteHistory`] says so, protect the pages just reset
//!    ([`WriteTracker::protect_written`]).
//!
//! The order matters: resetting a page writes it, so protecting first would
//! report every reset page as written again (and take a fault per page).
//!
//! Registration is per mapping: an `mmap` over part of a slot (a memory
//! image mapped in, or anonymous memory mapped over one) replaces the
//! registered mapping with an unregistered one. Such a range is found when
//! protecting it fails with `EPERM`, registered then, and protected again. A
//! range that is not registered is never wrong, only slower: its pages carry
//! no protection, so all of them are reported as written, as without this
//! module.
//!
//! The kernel forces `UFFD_FEATURE_WP_UNPOPULATED` on with `WP_ASYNC`. It
//! makes `UFFDIO_WRITEPROTECT` install markers in never-populated page-table
//! entries; that ioctl is not used here. The protecting `PAGEMAP_SCAN` asks
//! for no output, which takes the kernel's path for protecting alone: every
//! entry of the page tables that cover the range is protected, empty ones
//! by a marker, whatever the scan's categories. Ranges no page table covers
//! get no marker, and a write there creates a page that is not protected,
//! so it is reported as written by the next scan. (A marker is a swap-type
//! entry: the full scan's resident count includes the markers, which makes
//! it an overcount, never an undercount.)
//!
//! Faults from kernel mode need no handler either: in asynchronous mode the
//! kernel resolves them the same way, so the userfaultfd is created with
//! `UFFD_USER_MODE_ONLY`, which needs no privilege even where
//! `vm.unprivileged_userfaultfd` is 0. The descriptor is never read: with
//! only write protection registered, in asynchronous mode, and no events
//! asked for, the kernel queues nothing on it.

use super::pagemap::ioctl::{Categories, PageMapScanBuilder, ScanFlags};
use rustix::fd::{FromRawFd, OwnedFd};
use rustix::ioctl::{Opcode, Updater, ioctl, opcode};
use std::fs::File;
use std::io;
use std::ptr;

/// `UFFD_API`: the API version `UFFDIO_API` asks for.
const UFFD_API: u64 = 0xaa;
/// `UFFD_USER_MODE_ONLY`: the flag to `userfaultfd(2)`.
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
/// `UFFD_FEATURE_WP_ASYNC` (Linux 6.7).
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
/// `UFFDIO_REGISTER_MODE_WP`.
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;

/// `struct uffdio_api`.
#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

/// `struct uffdio_range`.
#[repr(C)]
struct UffdioRange {
    start: u64,
    len: u64,
}

/// `struct uffdio_register`.
#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

/// `UFFDIO_API`: `_IOWR(0xAA, 0x3F, struct uffdio_api)`.
const UFFDIO_API: Opcode = opcode::read_write::<UffdioApi>(0xaa, 0x3f);
/// `UFFDIO_REGISTER`: `_IOWR(0xAA, 0x00, struct uffdio_register)`.
const UFFDIO_REGISTER: Opcode = opcode::read_write::<UffdioRegister>(0xaa, 0x00);

/// Resets of a slot after which its pages are write-protected again even if
/// what it resets has not grown: a request that wrote more than its
/// successors stops being the reference after this many.
const REARM_AT_MOST_EVERY: u32 = 64;

/// What one slot remembers between resets, to write-protect its pages again
/// only when that pays.
///
/// Protecting pages costs a TLB flush, which interrupts every other CPU
/// running a thread of this process, and a fault on the next write to each
/// page; on a two-core VM serving a Rust handler that was more than the
/// copy it saved. Left unprotected, the pages written since the last
/// protection are reported again at the next reset and copied back again
/// (correct, only more bytes). So pages are protected again only when what
/// a reset copies has grown past twice what the first reset after the last
/// protection copied (one request's writes), or after
/// [`REARM_AT_MOST_EVERY`] resets: a handler that writes the same pages
/// every request pays the protection once in 64 requests, and a reset
/// copies at most about twice what one request wrote.
#[derive(Debug, Default)]
pub struct WriteHistory {
    /// Whether the slot's pages were ever protected.
    armed: bool,
    /// Resets since they were last protected.
    resets_since: u32,
    /// Bytes the first reset after the last protection copied back.
    reference: usize,
    /// Bytes of the slot's own pages resident when they were last protected
    /// (what the full scan counted then).
    resident_at_protection: usize,
    /// Resets done without the full scan, for tests to tell the paths apart.
    #[cfg(test)]
    pub(super) unprotected_resets: u32,
}

impl WriteHistory {
    /// Whether the pages just reset, `written` bytes of them, are to be
    /// protected now; counts this reset.
    pub(super) fn protect_now(&mut self, written: usize) -> bool {
        self.resets_since += 1;
        if self.armed && self.resets_since == 1 {
            self.reference = written;
        }
        let due = !self.armed
            || self.resets_since >= REARM_AT_MOST_EVERY
            || written > self.reference.saturating_mul(2);
        if due {
            self.armed = true;
            self.resets_since = 0;
        }
        due
    }

    /// Records what the full scan found resident when the pages were just
    /// protected.
    pub(super) fn protected_with(&mut self, resident: usize) {
        self.resident_at_protection = resident;
    }

    /// The most bytes a scan of unprotected entries alone
    /// ([`scan_unprotected`]) may report this time for its regions to be
    /// reset as they are, or `None` if this reset needs the full scan: the
    /// pages were never protected, this is the first reset since they were
    /// (which sets the reference from the full scan's exact count), or the
    /// protection is due by count. Past the limit, the full scan runs.
    ///
    /// The limit is the smaller of two bounds. Twice the reference: the
    /// full scan would protect again past it, and the unprotected entries
    /// include some that need no reset (see [`scan_unprotected`]), which
    /// are copied only while they are few. The rest of the resident budget:
    /// between two protections a page becomes the slot's own and resident
    /// only by being written (or reset), and then stays unprotected, so
    /// reported, until the next protection; what is resident is at most
    /// what was at the protection plus what this scan reports.
    pub(super) fn unprotected_limit(&self, keep_resident: usize) -> Option<usize> {
        if !self.armed || self.resets_since == 0 || self.resets_since + 1 >= REARM_AT_MOST_EVERY {
            return None;
        }
        keep_resident
            .checked_sub(self.resident_at_protection)
            .map(|allowance| allowance.min(self.reference.saturating_mul(2)))
            .filter(|limit| *limit > 0)
    }

    /// Counts a reset by the scan of unprotected entries that found
    /// `written` bytes (within [`WriteHistory::unprotected_limit`]) and
    /// returns the bytes resident at most.
    pub(super) fn counted_unprotected(&mut self, written: usize) -> usize {
        self.resets_since += 1;
        #[cfg(test)]
        {
            self.unprotected_resets += 1;
        }
        self.resident_at_protection + written
    }
}

/// A userfaultfd in asynchronous write-protect mode, for one pool's memory.
#[derive(Debug)]
pub struct WriteTracker {
    uffd: OwnedFd,
    /// Whether this kernel's scan of unprotected entries
    /// ([`scan_unprotected`]) surely reads a swapped-out page's entry right
    /// (Linux 6.10 and later).
    scans_unprotected: bool,
}

impl WriteTracker {
    /// A tracker, or `None` if this kernel or this process cannot have one
    /// (before Linux 6.7, `userfaultfd(2)` refused by a seccomp filter, or
    /// `CONFIG_USERFAULTFD` off).
    pub fn new() -> Option<WriteTracker> {
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY;
        // SAFETY: `userfaultfd(2)` takes one integer and returns a new
        // descriptor or -1; it touches no memory of ours.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        let fd = libc::c_int::try_from(fd).ok().filter(|fd| *fd >= 0)?;
        // SAFETY: `fd` was just returned by the kernel and is owned by no one
        // else.
        let uffd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut api = UffdioApi {
            api: UFFD_API,
            features: UFFD_FEATURE_WP_ASYNC,
            ioctls: 0,
        };
        // SAFETY: `UFFDIO_API` reads and writes one `struct uffdio_api`, which
        // `api` is, for the duration of the call. A kernel without
        // `WP_ASYNC` refuses the request with `EINVAL`.
        let asked = unsafe { ioctl(&uffd, Updater::<UFFDIO_API, _>::new(&mut api)) };
        if asked.is_err() || api.features & UFFD_FEATURE_WP_ASYNC == 0 {
            return None;
        }
        Some(WriteTracker {
            uffd,
            scans_unprotected: kernel_at_least(6, 10),
        })
    }

    /// Whether resets between protections may use [`scan_unprotected`].
    pub(super) fn scans_unprotected(&self) -> bool {
        self.scans_unprotected
    }

    /// Registers `start..start + len` for write protection, so that its pages
    /// can be protected and their writes seen. The range must be mapped.
    fn register(&self, start: *const u8, len: usize) -> io::Result<()> {
        let mut register = UffdioRegister {
            range: UffdioRange {
                start: start.addr() as u64,
                len: len as u64,
            },
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        // SAFETY: `UFFDIO_REGISTER` reads and writes one `struct
        // uffdio_register` for the duration of the call; it changes the flags
        // of the mappings in the range, never their contents.
        unsafe {
            ioctl(
                &self.uffd,
                Updater::<UFFDIO_REGISTER, _>::new(&mut register),
            )
        }?;
        Ok(())
    }

    /// Protects every page of `start..start + len` that the scan in
    /// `reset_with_pagemap` reports as written (and has just reset), so that
    /// the next scan reports only pages written after now. Registers the
    /// range first where part of it is not registered yet.
    ///
    /// A failure is logged and otherwise ignored: pages left unprotected are
    /// reported as written by the next scan and reset again, which is correct
    /// and only slower.
    pub fn protect_written(&self, pagemap: &File, start: *const u8, len: usize) {
        if len == 0 {
            return;
        }
        let err = match protect(pagemap, start, len) {
            Ok(()) => return,
            Err(err) => err,
        };
        // `EPERM`: some mapping in the range is not registered (a slot's
        // first reset, or an image mapped over part of it since).
        if err != rustix::io::Errno::PERM {
            log::debug!("write-protecting reset pages failed: {err}");
            return;
        }
        if let Err(err) = self.register(start, len) {
            log::debug!("registering pages for write tracking failed: {err}");
            return;
        }
        if let Err(err) = protect(pagemap, start, len) {
            log::debug!("write-protecting reset pages failed: {err}");
        }
    }
}

/// The pages that need a reset: written (since last protected, with
/// tracking), not the shared zero page or a page of a file (both read-only,
/// so unchanged), and in memory or in swap. No categories are returned,
/// which groups regions together.
pub(super) fn scan_written(region: *const [u8]) -> PageMapScanBuilder {
    let mut scan = PageMapScanBuilder::new(region);
    scan.category_inverted(Categories::PFNZERO | Categories::FILE)
        .category_mask(Categories::WRITTEN | Categories::PFNZERO | Categories::FILE)
        .category_anyof_mask(Categories::PRESENT | Categories::SWAPPED)
        .return_mask(Categories::empty());
    scan
}

/// With tracking: every page of this process's own (not the zero page, not
/// a file's), in memory or in swap, written since last protected or not;
/// each region says whether it was written. These are what a slot keeps
/// resident: the scan's page budget bounds them, so that a slot whose
/// instances wrote different pages each time does not keep them all.
pub(super) fn scan_resident(region: *const [u8]) -> PageMapScanBuilder {
    let mut scan = PageMapScanBuilder::new(region);
    scan.category_inverted(Categories::PFNZERO | Categories::FILE)
        .category_mask(Categories::PFNZERO | Categories::FILE)
        .category_anyof_mask(Categories::PRESENT | Categories::SWAPPED)
        .return_mask(Categories::WRITTEN);
    scan
}

/// With tracking, between protections: every page-table entry that is not
/// write-protected, the kernel judging from the entry alone. Asking for
/// `WRITTEN` and nothing else takes `PAGEMAP_SCAN`'s fast path, which reads
/// each entry's protection bit and looks up no page, where [`scan_resident`]
/// looks up every resident page (for a JavaScript handler's memory, under
/// `perf trace` on a two-core VM: about 85 µs a reset, against 25 for this
/// scan).
///
/// It reports every page `scan_written` would, and also entries that need no
/// reset: an empty entry of a page table made since the last protection or
/// emptied by a decommit since, a page of the image or the zero page mapped
/// where no protection marker was, and, on kernels with the fix
/// "fs/proc/task_mmu: fix PAGEMAP_SCAN written state for PMD holes" (July 2026,
/// sent to stable kernels), every range of a registered mapping that no page
/// table covers: a large memory that is mostly untouched is mostly that.
/// Resetting those restores what they already hold, but it fills them: a new
/// page table's 512 entries would become 2 MiB of copied, resident pages. So
/// the regions are reset as they are only if their total is within
/// [`WriteHistory::unprotected_limit`] (a few such entries); past it,
/// `scan_written` runs over the reported regions alone (see
/// `reset_unprotected`).
///
/// Until the fix "fs/proc/task_mmu: fix uffd-wp confusion in
/// pagemap_scan_pmd_entry()" (merged for Linux 6.9, May 2024, and sent to
/// stable kernels) the fast path read the protection bit of a swapped-out
/// page's entry at the position a present page keeps it, so a written page
/// in swap could be taken for protected and skipped; hence
/// [`WriteTracker::scans_unprotected`], which asks for 6.10 (a version
/// number cannot tell which 6.9 or stable kernel has the fix).
pub(super) fn scan_unprotected(region: *const [u8]) -> PageMapScanBuilder {
    let mut scan = PageMapScanBuilder::new(region);
    scan.category_mask(Categories::WRITTEN)
        .return_mask(Categories::WRITTEN);
    scan
}

/// Whether the running kernel's version is at least `major.minor`; false if
/// it cannot be read.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|part| part.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(have_major), Some(have_minor)) => (have_major, have_minor) >= (major, minor),
        _ => false,
    }
}

/// One `PAGEMAP_SCAN` that write-protects the pages `scan_written` matches
/// in `start..start + len`, reporting none of them. Fails with `EPERM` if a
/// mapping in the range is not registered for asynchronous write protection.
fn protect(pagemap: &File, start: *const u8, len: usize) -> rustix::io::Result<()> {
    let mut scan = scan_written(ptr::slice_from_raw_parts(start, len));
    scan.flags(ScanFlags::WP_MATCHING | ScanFlags::CHECK_WPASYNC);
    // SAFETY: as for every `PAGEMAP_SCAN` in `reset_with_pagemap`: the ioctl
    // is issued on `/proc/self/pagemap` and given an empty output vector,
    // so it writes no memory of ours; protecting pages changes no contents.
    unsafe { ioctl(pagemap, scan.build(&mut [])).map(drop) }
}
