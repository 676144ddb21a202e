//! Socket options as the kernel takes them: the checks a guest's option
//! values pass before any socket is made.

use super::error::NetError;

/// A kernel buffer size (SO_SNDBUF, SO_RCVBUF) as `setsockopt` takes it.
///
/// # Errors
/// [`NetError::InvalidArgument`] for 0 or more than `i32::MAX`.
pub(crate) fn buffer_size(bytes: u64) -> Result<u32, NetError> {
    u32::try_from(bytes)
        .ok()
        .filter(|&n| n > 0 && n <= i32::MAX as u32)
        .ok_or_else(|| {
            NetError::InvalidArgument(format!(
                "buffer size {bytes} is out of range (1 to {})",
                i32::MAX
            ))
        })
}
