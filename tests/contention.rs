//! Contention waits for the write slot instead of surfacing "busy", and the wait is bounded:
//! a writer that never lets go makes the others fail closed with a message naming the cause.
//! (Its own test binary, because the bound is read from the environment.)

mod common;

use std::sync::mpsc;

use common::*;
use warden::Error;

#[test]
fn a_writer_waits_for_the_slot_and_gives_up_only_after_the_bound() {
    std::env::set_var("WARDEN_WRITE_WAIT_MS", "300");
    let f = Fixture::new();
    let t = key_template();

    // Positive control: a short hold is waited out, and the call succeeds.
    let (held, release) = (mpsc::channel::<()>(), mpsc::channel::<()>());
    let store = f.kernel.store().clone();
    let holder = std::thread::spawn(move || {
        store
            .write(|_| {
                held.0.send(()).unwrap();
                release.1.recv().unwrap();
                Ok(())
            })
            .unwrap()
    });
    held.1.recv().unwrap();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        release.0.send(()).unwrap();
    });
    f.kernel.propose(&allow(&refund("a", 1), &t)).unwrap().commit(&serde_json::json!(1)).unwrap();
    holder.join().unwrap();
    releaser.join().unwrap();

    // A hold past the bound: the waiting call fails closed and writes nothing.
    let (held, release) = (mpsc::channel::<()>(), mpsc::channel::<()>());
    let store = f.kernel.store().clone();
    let holder = std::thread::spawn(move || {
        store
            .write(|_| {
                held.0.send(()).unwrap();
                release.1.recv().unwrap();
                Ok(())
            })
            .unwrap()
    });
    held.1.recv().unwrap();
    let other = warden::Kernel::open(f.path(), warden::KernelOptions::default()).unwrap();
    let refused = other.propose(&allow(&refund("b", 1), &t)).unwrap_err();
    assert!(matches!(&refused, Error::Store(message) if message.contains("longer than 300 ms")), "{refused}");
    release.0.send(()).unwrap();
    holder.join().unwrap();
    assert!(f.kernel.effect("refund:b").unwrap().is_none());
    // A store fault latches that handle closed until it is reopened.
    assert!(matches!(other.effect("refund:a").unwrap_err(), Error::Poisoned(_)));
}
