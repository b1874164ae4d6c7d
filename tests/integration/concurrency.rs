//! Eight jobs saving the same key at once, on every store of the matrix (`support::stores`),
//! while other jobs keep restoring it: one save creates the entry, the others report `exists`,
//! and no restore ever sees a partial or corrupt entry — each one is a clean miss or the whole
//! tree.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::{self, NO_STATE, Peer, Step, Store, on_every_store, snapshot, write};

const INPUTS: [(&str, &str); 3] = [("path", "out"), ("native", "none"), ("variant", "concurrency")];
const SAVERS: usize = 8;

fn generate_outputs(step: &Step) {
    // Large enough that the saves overlap: several MiB of barely compressible bytes.
    write(&step.ws.join("out/weights.bin"), &support::noise(6 << 20, 0x2545f4914f6cdd1d));
    for i in 0..50 {
        write(&step.ws.join(format!("out/kernels/k{i}.py")), format!("kernel {i}\n").as_bytes());
    }
}

/// Run the savers and two restorers at once against `peer`; return the savers' `save-result`s
/// and what the restorers saw.
fn race(peer: &dyn Peer) -> (Vec<String>, Vec<String>) {
    let reference = {
        let step = Step::new();
        generate_outputs(&step);
        snapshot(&step.ws.join("out"))
    };
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let restorers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let step = peer.step();
                    let mut seen = Vec::new();
                    loop {
                        let finished = done.load(Ordering::SeqCst);
                        let _ = std::fs::remove_dir_all(step.ws.join("out"));
                        let r = step.run(&["restore"], &INPUTS, NO_STATE);
                        assert_eq!(r.code, 0, "{}", r.stdout);
                        match (r.output("reused"), r.output("miss-reason")) {
                            ("true", "none") => {
                                assert_eq!(snapshot(&step.ws.join("out")), reference, "a hit restores the whole tree");
                                seen.push("hit".to_owned());
                            }
                            ("false", "not-found") => {
                                assert!(!step.ws.join("out").exists(), "a miss writes nothing");
                                seen.push("miss".to_owned());
                            }
                            other => panic!("a restore during the saves saw {other:?}: {}", r.stdout),
                        }
                        if finished {
                            assert_eq!(
                                seen.last().map(String::as_str),
                                Some("hit"),
                                "after the saves, the entry restores"
                            );
                            return seen;
                        }
                    }
                })
            })
            .collect();
        let savers: Vec<_> = (0..SAVERS)
            .map(|_| {
                s.spawn(|| {
                    let step = peer.step();
                    generate_outputs(&step);
                    let r = step.run(&["save"], &INPUTS, NO_STATE);
                    assert_eq!(r.code, 0, "{}", r.stdout);
                    assert!(!r.stdout.contains("::warning::"), "a lost race is not a warning: {}", r.stdout);
                    r.output("save-result").to_owned()
                })
            })
            .collect();
        let results: Vec<String> = savers.into_iter().map(|h| h.join().unwrap()).collect();
        done.store(true, Ordering::SeqCst);
        let seen = restorers.into_iter().flat_map(|h| h.join().unwrap()).collect();
        (results, seen)
    })
}

on_every_store!(eight_saves_of_one_key_while_others_restore);

fn eight_saves_of_one_key_while_others_restore(store: Store) {
    let peer = store.start();
    let (results, seen) = race(peer.as_ref());
    eprintln!("restores during the saves: {seen:?}");
    let count = |result: &str| results.iter().filter(|r| *r == result).count();
    let (saved, exists) = (count("saved"), count("exists"));
    if peer.refuses_racing_commits() {
        assert_eq!((saved, exists), (1, SAVERS - 1), "{results:?}");
    } else {
        eprintln!("{SAVERS} racing saves on {store:?}: {saved} saved, {exists} exists");
        assert!(saved >= 1 && saved + exists == SAVERS, "{results:?}");
    }
    assert_eq!(peer.entries(), 1, "one committed entry");
    assert_eq!(peer.unfinished_uploads(), Vec::<String>::new(), "no upload left behind");
}
