//! Receive buffers, pooled per socket.
//!
//! A socket receives small datagrams by the thousand, and a 64 KiB
//! allocation per datagram would be most of the cost of receiving one. A
//! buffer is borrowed for one receive and given back by a guard, so an
//! abandoned receive gives its buffer back too; what leaves is an exact-size
//! copy. Every buffer, on loan or kept, is paid from the run's host memory
//! (64 KiB each: a thousand sockets that each received once hold 64 MiB).

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, PoisonError};

use super::MAX_DATAGRAM_V4;
use crate::net::budget::{Budget, Charge};
use crate::net::error::NetError;
use crate::net::limits::POOL_KEEP;

/// The receive buffer: one byte longer than the largest datagram IPv4 can
/// carry, so that a datagram filling it is one that did not fit (reported
/// as truncated) rather than one that happened to be that long.
pub(crate) const RECEIVE_BUFFER: usize = MAX_DATAGRAM_V4 + 1;

pub(super) struct Pool {
    kept: Mutex<Vec<Buffer>>,
    budget: Arc<Budget>,
}

/// A receive buffer and what it is paid with.
type Buffer = (Box<[u8]>, Charge);

/// A buffer on loan from a [`Pool`]; returned when dropped.
pub(super) struct Pooled<'a> {
    pool: &'a Pool,
    buf: Option<Buffer>,
}

impl Pool {
    /// An empty pool whose buffers are paid from `budget`.
    pub(super) fn new(budget: Arc<Budget>) -> Pool {
        Pool {
            kept: Mutex::default(),
            budget,
        }
    }

    /// A kept buffer, or a new one.
    ///
    /// # Errors
    /// [`NetError::LimitReached`] if a new one is needed and the run's host
    /// memory cannot pay for it.
    pub(super) fn take(&self) -> Result<Pooled<'_>, NetError> {
        let buf = match self.lock().pop() {
            Some(kept) => kept,
            None => {
                let charge = self.budget.charge(RECEIVE_BUFFER, "a UDP receive buffer")?;
                (vec![0; RECEIVE_BUFFER].into_boxed_slice(), charge)
            }
        };
        Ok(Pooled {
            pool: self,
            buf: Some(buf),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Buffer>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.lock().len()
    }
}

impl Deref for Pooled<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], |(buf, _)| buf)
    }
}

impl DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.buf.as_mut().map_or(&mut [], |(buf, _)| buf)
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
