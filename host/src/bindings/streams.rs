//! The two `stream<u8>` endpoints of a socket, over the core's reader and
//! writer: bytes go between the kernel and guest memory with no host copy
//! (the writer's backlog aside, see [`crate::net::tcp`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use wasmtime::StoreContextMut;
use wasmtime::component::{
    Destination, Source, StreamConsumer, StreamProducer, StreamResult, VecBuffer,
};

use crate::net::{Reader, Writer};

/// Capacity `Destination::as_direct` would use if the reading end were the
/// host rather than a guest; moat's streams are read by guests, so this is
/// only a ceiling for that case: one SDK chunk.
const HOST_READ_CAPACITY: usize = 64 * 1024;

/// The producing end of a `receive` stream: `recv(2)` into guest memory.
pub(super) struct ReceiveProducer(pub(super) Reader);

impl<D> StreamProducer<D> for ReceiveProducer {
    type Item = u8;
    type Buffer = VecBuffer<u8>;

    fn poll_produce<'a>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut store: StoreContextMut<'a, D>,
        dst: Destination<'a, u8, VecBuffer<u8>>,
        finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        let reader = &mut self.get_mut().0;
        // `finish` means the guest is cancelling its read: read nothing,
        // since bytes delivered to a cancelled read may be dropped with its
        // buffer. They stay in the kernel for the next read.
        if finish {
            return Poll::Ready(Ok(StreamResult::Cancelled));
        }
        if dst.remaining(&mut store) == Some(0) {
            // A zero-length read asks whether data (or the end) is there.
            return reader
                .poll_read(cx, &mut [])
                .map(|_| Ok(StreamResult::Completed));
        }
        let mut dst = dst.as_direct(store, HOST_READ_CAPACITY);
        match reader.poll_read(cx, dst.remaining()) {
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => Poll::Ready(Ok(StreamResult::Dropped)),
            Poll::Ready(Ok(n)) => {
                dst.mark_written(n);
                Poll::Ready(Ok(StreamResult::Completed))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The consuming end of a `send` stream: `send(2)` from guest memory, or
/// into the socket's bounded backlog when the kernel is full.
pub(super) struct SendConsumer(pub(super) Writer);

impl<D> StreamConsumer<D> for SendConsumer {
    type Item = u8;

    fn poll_consume(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        store: StoreContextMut<D>,
        src: Source<'_, u8>,
        finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        let writer = &mut self.get_mut().0;
        let mut src = src.as_direct(store);
        match writer.poll_write(cx, src.remaining()) {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    src.mark_read(n);
                }
                Poll::Ready(Ok(StreamResult::Completed))
            }
            // The error went to the socket's send outcome (the future
            // beside the stream); the stream just ends.
            Poll::Ready(Err(_)) => Poll::Ready(Ok(StreamResult::Dropped)),
            Poll::Pending if finish => Poll::Ready(Ok(StreamResult::Cancelled)),
            Poll::Pending => Poll::Pending,
        }
    }
}
