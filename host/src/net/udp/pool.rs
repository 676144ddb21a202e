//! Receive buffers, pooled per socket.
//!
//! A socket receives small datagrams by the thousand, and a 64 KiB
//! allocation per datagram would be most of the cost of receiving one
//! (seed 004). A buffer is borrowed for one receive and given back by a guard, so an
//! abandoned receive gives its buffer back too; what leaves is an exact-size
//! copy.

use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, PoisonError};

use super::MAX_DATAGRAM_V4;

/// The receive buffer: one byte longer than the largest datagram IPv4 can
/// carry, so that a datagram filling it is one that did not fit (reported
/// as truncated) rather than one that happened to be that long.
pub const RECEIVE_BUFFER: usize = MAX_DATAGRAM_V4 + 1;

/// Buffers a socket keeps between receives: enough for a few receives in
/// flight at once without allocating; a burst of more takes more, and the
/// surplus is freed, not kept (4 × 64 KiB is the most an idle socket holds).
pub const POOL_KEEP: usize = 4;

#[derive(Default)]
pub(super) struct Pool(Mutex<Vec<Box<[u8]>>>);

/// A buffer on loan from a [`Pool`]; returned when dropped.
pub(super) struct Pooled<'a> {
    pool: &'a Pool,
    buf: Option<Box<[u8]>>,
}

impl Pool {
    pub(super) fn take(&self) -> Pooled<'_> {
        let reused = self.lock().pop();
        Pooled {
            pool: self,
            buf: Some(reused.unwrap_or_else(|| vec![0; RECEIVE_BUFFER].into_boxed_slice())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Box<[u8]>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.lock().len()
    }
}

impl Deref for Pooled<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.buf.as_deref().unwrap_or_default()
    }
}

impl DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.buf.as_deref_mut().unwrap_or_default()
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            let mut kept = self.pool.lock();
            if kept.len() < POOL_KEEP {
                kept.push(buf);
            }
        }
    }
}
