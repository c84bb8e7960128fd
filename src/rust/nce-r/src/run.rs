//! Running core work in a per-call thread pool while the R main thread watches for interrupts.

use crate::convert::panic_message;
use nce_core::NceError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

extern "C" {
    /// Defined in entrypoint.c: R_CheckUserInterrupt under R_ToplevelExec.
    fn nce_interrupt_pending() -> std::os::raw::c_int;
}

fn interrupt_pending() -> bool {
    // Safety: called only from the R main thread (this module's `run` loop).
    unsafe { nce_interrupt_pending() != 0 }
}

/// Run `f` inside a fresh pool of `threads` threads. The calling (R main) thread waits and polls
/// R for a user interrupt; `f` sees the request through the flag it is given. Workers never
/// touch R. A panic in `f` becomes an error.
pub fn run<T: Send>(threads: usize, f: impl FnOnce(&AtomicBool) -> Result<T, NceError> + Send) -> Result<T, NceError> {
    // `run_serving` with nothing to serve: the work never asks.
    run_serving(threads, |()| (), |stop, _: &Requester<(), ()>| f(stop))
}

/// What the work sends to the R main thread while `run_serving` runs it.
enum Msg<Q, A> {
    Ask(Q, mpsc::Sender<A>),
    Done,
}

/// The work's way to have something done on the R main thread (e.g. an R callback): `ask`
/// blocks until the main thread has answered.
pub struct Requester<Q, A> {
    tx: Mutex<mpsc::Sender<Msg<Q, A>>>,
}

impl<Q: Send, A: Send> Requester<Q, A> {
    /// The main thread's answer, or None when it is gone.
    pub fn ask(&self, q: Q) -> Option<A> {
        let (tx, rx) = mpsc::channel();
        self.tx.lock().ok()?.send(Msg::Ask(q, tx)).ok()?;
        rx.recv().ok()
    }
}

/// As `run`, and the R main thread answers the work's requests with `serve` (which may call R)
/// while it waits, between its polls for interrupts.
pub fn run_serving<T: Send, Q: Send, A: Send>(
    threads: usize,
    mut serve: impl FnMut(Q) -> A,
    f: impl FnOnce(&AtomicBool, &Requester<Q, A>) -> Result<T, NceError> + Send,
) -> Result<T, NceError> {
    let _span = crate::GLOBAL.span();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_err(|e| NceError::Numerical(format!("could not start a thread pool: {e}")))?;
    let stop = AtomicBool::new(false);
    // Set when this loop took R's pending interrupt: R_CheckUserInterrupt consumed it, so it must
    // come back to R even when the work finished anyway (it may have been past its last poll).
    let mut interrupted = false;
    let (tx, rx) = mpsc::channel::<Msg<Q, A>>();
    let done = tx.clone();
    let requester = Requester { tx: Mutex::new(tx) };
    std::thread::scope(|s| {
        let handle = s.spawn(|| {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.install(|| f(&stop, &requester))));
            let _ = done.send(Msg::Done);
            out
        });
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Msg::Ask(q, reply)) => {
                    let _ = reply.send(serve(q));
                }
                Ok(Msg::Done) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if !stop.load(Ordering::Relaxed) && interrupt_pending() {
                        interrupted = true;
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
        match handle.join() {
            Ok(Ok(_)) if interrupted => Err(NceError::Interrupted),
            Ok(Ok(r)) => r,
            Ok(Err(p)) | Err(p) => Err(NceError::Internal(panic_message(p.as_ref()))),
        }
    })
}
