//! A call waits while another transaction holds the store's writer, and the wait is bounded: a
//! transaction that never lets go makes the others fail closed — `Unavailable`, with nothing
//! applied — naming the cause. (Its own test binary, because the bound is read from the
//! environment.)

mod common;

use std::sync::mpsc;
use warden::test_support::KernelInternals;

use common::*;
use warden::Error;

/// Hold the store's one write transaction from another thread until told to let go.
fn hold_writer(f: &Fixture) -> (std::thread::JoinHandle<()>, mpsc::Sender<()>) {
    let (held, release) = (mpsc::channel::<()>(), mpsc::channel::<()>());
    let store = f.kernel.store().clone();
    let holder = std::thread::spawn(move || {
        store
            .tamper(|_| {
                held.0.send(()).unwrap();
                release.1.recv().unwrap();
                Ok(())
            })
            .unwrap();
    });
    held.1.recv().unwrap();
    (holder, release.0)
}

#[test]
fn a_call_waits_for_the_writer_and_gives_up_only_after_the_bound_having_applied_nothing() {
    std::env::set_var("WARDEN_WRITE_WAIT_MS", "300");
    let f = Fixture::new();
    let t = key_template();

    // Positive control: a short hold is waited out, and the call succeeds.
    let (holder, release) = hold_writer(&f);
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        release.send(()).unwrap();
    });
    f.kernel.propose(&allow(&refund("a", 1), &t)).unwrap().commit(&serde_json::json!(1)).unwrap();
    holder.join().unwrap();
    releaser.join().unwrap();

    // A hold past the bound: the waiting call fails closed and its reservation is withdrawn.
    let (holder, release) = hold_writer(&f);
    let refused = f.kernel.propose(&allow(&refund("b", 1), &t)).unwrap_err();
    assert!(
        matches!(&refused, Error::Unavailable(message) if message.contains("longer than 300 ms") && message.contains("nothing was applied")),
        "{refused}"
    );
    release.send(()).unwrap();
    holder.join().unwrap();
    // The withdrawn reservation never lands, even once the writer is free again.
    f.kernel.flush().unwrap();
    assert!(f.kernel.effect("refund:b").unwrap().is_none());
    // Unavailable does not latch the handle: the next call works.
    assert!(f.kernel.effect("refund:a").unwrap().is_some());
    f.kernel.propose(&allow(&refund("b", 1), &t)).unwrap().commit(&serde_json::json!(2)).unwrap();
}
