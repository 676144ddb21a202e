//! Running tasks side by side in one guest.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Runs `task` beside the guest's other tasks; await the handle for its
/// result, or drop the handle to let it run on its own.
///
/// Tasks run while the others await; they need no `Send`. When `main`
/// returns the program ends, and with it every task still running, as a
/// process's exit does.
///
/// ```no_run
/// # async fn demo() {
/// let answer = moat_sdk::spawn(async { 6 * 7 });
/// assert_eq!(answer.await, 42);
/// # }
/// ```
pub fn spawn<T: 'static>(task: impl Future<Output = T> + 'static) -> JoinHandle<T> {
    let slot = Rc::new(RefCell::new(Slot {
        value: None,
        waker: None,
    }));
    let filled = Rc::clone(&slot);
    wit_bindgen::spawn_local(async move {
        let value = task.await;
        let waker = {
            let mut slot = filled.borrow_mut();
            slot.value = Some(value);
            slot.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    });
    JoinHandle(slot)
}

/// The result of a [`spawn`]ed task, once it finishes.
///
/// ```no_run
/// # async fn demo() {
/// let handle = moat_sdk::spawn(async { "done" });
/// assert_eq!(handle.await, "done");
/// # }
/// ```
pub struct JoinHandle<T>(Rc<RefCell<Slot<T>>>);

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
}

impl<T> Future for JoinHandle<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut slot = self.0.borrow_mut();
        match slot.value.take() {
            Some(value) => Poll::Ready(value),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
