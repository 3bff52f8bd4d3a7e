//! A full file system: every file block a store goes to is allocated (`reserve`) before the
//! store, so running out of space is an I/O error from the call that needed the space (on real
//! files a store into an unallocated mapped page is a SIGBUS), nothing acknowledged is lost, and
//! a database on a full file system still opens and reads.
#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_plush::{Error, Migration, Options, Plush, SimStorage};
use std::collections::BTreeMap;

fn options() -> Options {
    Options {
        migration: Migration::Inline,
        payload_segment_bytes: 16384,
        ..crate::support::tiny()
    }
}

fn value_of(k: u64) -> Vec<u8> {
    vec![k as u8; (k % 50) as usize * 10]
}

#[test]
fn a_preallocation_the_free_space_cannot_hold_is_refused_before_allocating() {
    // What a successful open with two preallocated levels allocates, then one page less.
    let two = Options {
        preallocate_levels: 2,
        ..options()
    };
    let sim = SimStorage::new(0, 1);
    sim.limit_space(Some(1 << 40));
    drop(Plush::open_with(Box::new(sim.clone()), two.clone()).unwrap());
    let full = (1 << 40) - sim.space_left().unwrap();
    let no_prealloc = Options {
        preallocate_levels: 0,
        ..options()
    };
    let sim = SimStorage::new(0, 1);
    sim.limit_space(Some(1 << 40));
    drop(Plush::open_with(Box::new(sim.clone()), no_prealloc.clone()).unwrap());
    let created = (1 << 40) - sim.space_left().unwrap();
    // Room for the database and half its preallocated levels.
    let limit = created + (full - created) / 2;
    // A new database is refused before its manifest is written (the creation's own check).
    let sim = SimStorage::new(0, 1);
    sim.limit_space(Some(limit));
    let e = Plush::open_with(Box::new(sim.clone()), two.clone())
        .err()
        .unwrap();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    assert!(e.to_string().contains("a new database"), "{e}");
    assert!(sim.image_now().is_empty());
    // An existing one, reopened with the preallocation, is refused before allocating. (The
    // creation check counts the whole recovery log, which fills as it is used, so the
    // database is created with room to spare, then the space is cut.)
    sim.limit_space(Some(1 << 40));
    drop(Plush::open_with(Box::new(sim.clone()), no_prealloc.clone()).unwrap());
    sim.limit_space(Some((full - created) / 2));
    let e = Plush::open_with(Box::new(sim.clone()), two).err().unwrap();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    assert!(e.to_string().contains("preallocate_levels=2 needs"), "{e}");
    // Nothing was allocated for the levels' entries; an open without preallocation works.
    assert!(
        sim.space_left().unwrap() * 4 > full - created,
        "{:?}",
        sim.space_left()
    );
    drop(Plush::open_with(Box::new(sim), no_prealloc).unwrap());
    // More levels than exist is an argument error.
    let e = Plush::open_with(
        Box::new(SimStorage::new(0, 1)),
        Options {
            preallocate_levels: 9,
            levels_max: 3,
            ..options()
        },
    )
    .err()
    .unwrap();
    assert!(
        e.to_string()
            .contains("preallocate_levels 9 above levels_max 3"),
        "{e}"
    );
}

#[test]
fn running_out_of_space_is_an_io_error_and_loses_nothing() {
    // Space limits from "nothing at all" up to more than the run needs, so that the limit is
    // reached in creation, log chunks, migrations to every level and payload segments.
    let (mut open_failed, mut put_failed, mut reopened) = (0, 0, 0);
    for limit_pages in (0..40u64).chain((40..400).step_by(23)) {
        let sim = SimStorage::new(0, limit_pages);
        sim.limit_space(Some(limit_pages * 4096));
        let mut acked: BTreeMap<u64, Option<Vec<u8>>> = BTreeMap::new();
        match Plush::open_with(Box::new(sim.clone()), options()) {
            Err(e) => {
                assert!(matches!(e, Error::Io { .. }), "{limit_pages}: {e}");
                open_failed += 1;
            }
            Ok(db) => {
                let mut failures = 0;
                for k in 0..2000u64 {
                    let r = if k % 3 == 0 {
                        db.put_bytes(&k.to_le_bytes(), &value_of(k))
                            .map(|_| Some(value_of(k)))
                    } else {
                        db.put(k, k * 3)
                            .map(|_| Some((k * 3).to_le_bytes().to_vec()))
                    };
                    match r {
                        Ok(v) => {
                            acked.insert(k, v);
                        }
                        Err(e) => {
                            let msg = e.to_string();
                            assert!(matches!(e, Error::Io { .. }), "{limit_pages}: {msg}");
                            assert!(msg.contains("No space left"), "{limit_pages}: {msg}");
                            failures += 1;
                            put_failed += usize::from(failures == 1);
                            if failures > 20 {
                                break;
                            }
                        }
                    }
                }
                for (k, v) in &acked {
                    assert_eq!(db.get_bytes(&k.to_le_bytes()).unwrap().as_ref(), v.as_ref());
                }
            }
        }
        assert_eq!(sim.unreserved_flushes(), 0, "limit {limit_pages} pages");
        // Still full: the database opens (it needs no new space) and reads every record.
        let full = SimStorage::from_image(sim.image_now(), 0, 1);
        full.limit_space(Some(0));
        if let Ok(db) = Plush::open_with(Box::new(full.clone()), options()) {
            reopened += 1;
            for (k, v) in &acked {
                let got = db.get_bytes(&k.to_le_bytes()).unwrap();
                assert_eq!(got.as_ref(), v.as_ref(), "limit {limit_pages} key {k}");
            }
        } else {
            assert!(
                acked.is_empty(),
                "limit {limit_pages}: a database with records did not open on a full disk"
            );
        }
        assert_eq!(
            full.unreserved_flushes(),
            0,
            "limit {limit_pages} pages, reopen"
        );
    }
    // The sweep reached the limit while opening, while writing, and reopened full disks.
    assert!(
        open_failed > 0 && put_failed > 10 && reopened > 10,
        "{open_failed} {put_failed} {reopened}"
    );
}
