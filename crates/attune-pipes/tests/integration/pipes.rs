//! Pipes end to end: every mechanism moves the right bytes; bad locators, short files, full
//! disks and paths the runtime cannot serve give errors that name what was wrong.
#![allow(clippy::unwrap_used)]

use attune_pipes::{
    Chain, DramOptions, Error, FileOptions, Locator, LocatorKind, Mechanism, MechanismChoice,
    PipeOptions, Runtime, RuntimeOptions,
};
use std::path::Path;

fn runtime(m: MechanismChoice) -> Runtime {
    Runtime::new(RuntimeOptions {
        mechanism: m,
        queue_depth: 8,
        block_bytes: 64 * 1024,
        ..Default::default()
    })
    .unwrap()
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

const MECHS: [Mechanism; 3] = [Mechanism::IoUring, Mechanism::Threads, Mechanism::Mmap];

fn rw(f: &Path, opts: FileOptions) -> Locator {
    Locator::file(
        f,
        FileOptions {
            write: true,
            create: true,
            ..opts
        },
    )
    .unwrap()
}

#[test]
fn every_mechanism_reads_and_writes_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(1 << 20, 3);
    let input = dir.path().join("in");
    std::fs::write(&input, &data).unwrap();
    for m in MECHS {
        let rt = runtime(MechanismChoice::Only(m));
        assert_eq!(rt.report().mechanism, m);
        let src = Locator::file(&input, FileOptions::default()).unwrap();
        let mem = Locator::dram(1 << 20).unwrap();
        let up = rt.pipe(&src, &mem, PipeOptions::default()).unwrap();
        assert_eq!(up.transfer_blocking(0, 0, 1 << 20).unwrap(), 1 << 20);
        assert_eq!(&mem.bytes().unwrap()[..], &data[..], "{m} read");
        let out = dir.path().join(format!("out-{m}"));
        let dst = rw(&out, FileOptions::default());
        let down = rt.pipe(&mem, &dst, PipeOptions::default()).unwrap();
        // Unaligned offsets and an odd length work on buffered files.
        assert_eq!(
            down.transfer_blocking(5, 3, (1 << 20) - 5).unwrap(),
            (1 << 20) - 5
        );
        let written = std::fs::read(&out).unwrap();
        assert_eq!(&written[3..], &data[5..], "{m} write");
        let st = down.state();
        assert_eq!(st.mechanism, m.name());
        assert_eq!(st.bytes_moved, (1 << 20) - 5);
        assert_eq!(st.requests_in_flight, 0);
        assert_eq!(st.transfers_done, 1);
    }
}

#[test]
fn dram_on_huge_pages_starts_zeroed_and_moves_the_same_bytes_as_on_small_pages() {
    let dir = tempfile::tempdir().unwrap();
    let len = (4 << 20) + 4096; // not a whole number of huge pages
    let data = pattern(len, 9);
    let input = dir.path().join("in");
    std::fs::write(&input, &data).unwrap();
    // The advice is refused only by a kernel built without transparent huge pages.
    let thp = Path::new("/sys/kernel/mm/transparent_hugepage").exists();
    assert!(
        !Locator::dram(1 << 20).unwrap().huge_pages(),
        "under 2 MiB: heap"
    );
    for huge in [true, false] {
        let mem = Locator::dram_with(len as u64, DramOptions { huge_pages: huge }).unwrap();
        assert_eq!(mem.huge_pages(), huge && thp);
        assert!(
            mem.bytes().unwrap().iter().all(|&b| b == 0),
            "huge={huge}: zeroed"
        );
        for m in MECHS {
            let rt = runtime(MechanismChoice::Only(m));
            let src = Locator::file(
                &input,
                FileOptions {
                    direct: m != Mechanism::Mmap,
                    ..Default::default()
                },
            )
            .or_else(|_| Locator::file(&input, FileOptions::default()))
            .unwrap();
            let pipe = rt.pipe(&src, &mem, PipeOptions::default()).unwrap();
            mem.bytes().unwrap().fill(0);
            assert_eq!(
                pipe.transfer_blocking(0, 0, len as u64).unwrap(),
                len as u64
            );
            assert_eq!(&mem.bytes().unwrap()[..], &data[..], "huge={huge} {m}");
        }
    }
}

#[test]
fn io_uring_pipes_use_registered_buffers_and_fixed_files_unless_switched_off() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, pattern(1 << 16, 1)).unwrap();
    for reg in [true, false] {
        let rt = Runtime::new(RuntimeOptions {
            mechanism: MechanismChoice::Only(Mechanism::IoUring),
            register_buffers: reg,
            fixed_files: reg,
            ..Default::default()
        })
        .unwrap();
        let f = Locator::file(&path, FileOptions::default()).unwrap();
        let m = Locator::dram(1 << 16).unwrap();
        let p = rt.pipe(&f, &m, PipeOptions::default()).unwrap();
        p.transfer_blocking(0, 0, 1 << 16).unwrap();
        let st = p.state();
        if reg && rt.report().registered_buffers_refused.is_none() {
            assert!(st.registered_buffer, "{st:?}");
        }
        if !reg {
            assert!(!st.registered_buffer);
            assert!(!st.fixed_file);
            assert_eq!(
                rt.report().registered_buffers_refused.as_deref(),
                Some("switched off")
            );
        }
        assert_eq!(&m.bytes().unwrap()[..], &pattern(1 << 16, 1)[..]);
    }
}

#[test]
fn memory_registered_block_by_block_moves_straddling_and_whole_requests() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let data = pattern(1 << 18, 3);
    std::fs::write(&path, &data).unwrap();
    for per_block in [true, false] {
        let rt = Runtime::new(RuntimeOptions {
            mechanism: MechanismChoice::Only(Mechanism::IoUring),
            queue_depth: 4,
            block_bytes: 16 * 1024,
            register_per_block: per_block,
            ..Default::default()
        })
        .unwrap();
        if rt.report().registered_buffers_refused.is_some() {
            return; // no registered buffers on this kernel: nothing to check
        }
        let f = Locator::file(&path, FileOptions::default()).unwrap();
        // 4 whole blocks and a tail that no piece covers.
        let m = Locator::dram(4 * 16 * 1024 + 4096).unwrap();
        let p = rt.pipe(&f, &m, PipeOptions::default()).unwrap();
        let st = p.state();
        assert!(st.registered_buffer, "{st:?}");
        assert_eq!(st.registered_pieces, if per_block { 4 } else { 1 });
        // Aligned blocks (one piece each), then requests that straddle pieces and the tail.
        p.transfer_blocking(0, 0, 64 * 1024).unwrap();
        assert_eq!(&m.bytes().unwrap()[..64 * 1024], &data[..64 * 1024]);
        p.transfer_blocking(100_000, 1000, 64 * 1024 + 3096)
            .unwrap();
        assert_eq!(
            &m.bytes().unwrap()[1000..1000 + 64 * 1024 + 3096],
            &data[100_000..100_000 + 64 * 1024 + 3096]
        );
        // A second pipe on the same memory shares the registration; dropping both frees it.
        let p2 = rt.pipe(&f, &m, PipeOptions::default()).unwrap();
        assert_eq!(p2.state().registered_pieces, st.registered_pieces);
        drop((p, p2));
        let m2 = Locator::dram(4 * 16 * 1024).unwrap();
        let p3 = rt.pipe(&f, &m2, PipeOptions::default()).unwrap();
        p3.transfer_blocking(0, 0, 4 * 16 * 1024).unwrap();
        assert_eq!(&m2.bytes().unwrap()[..], &data[..4 * 16 * 1024]);
    }
}

#[test]
fn a_polled_submission_queue_moves_the_same_bytes_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let data = pattern(1 << 18, 5);
    std::fs::write(&path, &data).unwrap();
    let rt = Runtime::new(RuntimeOptions {
        mechanism: MechanismChoice::Only(Mechanism::IoUring),
        queue_depth: 4,
        block_bytes: 16 * 1024,
        sqpoll_idle_ms: Some(10),
        ..Default::default()
    })
    .unwrap();
    let rep = rt.report();
    assert!(rep.sqpoll != rep.sqpoll_refused.is_some(), "{rep:?}");
    let f = Locator::file(&path, FileOptions::default()).unwrap();
    let m = Locator::dram(1 << 18).unwrap();
    let p = rt.pipe(&f, &m, PipeOptions::default()).unwrap();
    for _ in 0..3 {
        p.transfer_blocking(0, 0, 1 << 18).unwrap();
        assert_eq!(&m.bytes().unwrap()[..], &data[..]);
        m.bytes().unwrap().fill(0);
    }
    let off = runtime(MechanismChoice::Only(Mechanism::IoUring));
    assert!(!off.report().sqpoll);
    assert!(off.report().sqpoll_refused.is_none());
}

#[test]
fn direct_files_move_aligned_blocks_and_refuse_misaligned_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("direct");
    let data = pattern(256 * 1024, 9);
    std::fs::write(&path, &data).unwrap();
    let direct = match Locator::file(
        &path,
        FileOptions {
            direct: true,
            write: true,
            ..Default::default()
        },
    ) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("skipping: O_DIRECT unsupported here: {e}");
            return;
        }
    };
    assert_eq!(direct.kind(), LocatorKind::DirectFile);
    for m in [Mechanism::IoUring, Mechanism::Threads] {
        let rt = runtime(MechanismChoice::Only(m));
        let mem = Locator::dram(256 * 1024).unwrap();
        let p = rt.pipe(&direct, &mem, PipeOptions::default()).unwrap();
        p.transfer_blocking(0, 0, 256 * 1024).unwrap();
        assert_eq!(&mem.bytes().unwrap()[..], &data[..]);
        match p.transfer(100, 0, 4096) {
            Err(Error::Misaligned { what, .. }) => {
                assert!(what.contains("file offset 100"), "{what}")
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
        match p.transfer(0, 512, 4096) {
            Err(Error::Misaligned { what, .. }) => {
                assert!(what.contains("memory offset 512"), "{what}")
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
    let rt = runtime(MechanismChoice::Only(Mechanism::Mmap));
    let mem = Locator::dram(4096).unwrap();
    match rt.pipe(&direct, &mem, PipeOptions::default()) {
        Err(Error::Unsupported { reason, .. }) => assert!(reason.contains("O_DIRECT"), "{reason}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn pmem_and_core_cache_locators_are_memory() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(MechanismChoice::Auto);
    let pm = Locator::pmem(dir.path().join("pmem"), 1 << 16).unwrap();
    let cc = Locator::core_cache(0, Some(1 << 16)).unwrap();
    assert_eq!(pm.kind(), LocatorKind::Pmem);
    assert_eq!(cc.kind(), LocatorKind::CoreCache);
    pm.bytes().unwrap().copy_from_slice(&pattern(1 << 16, 5));
    let p = rt.pipe(&pm, &cc, PipeOptions::default()).unwrap();
    assert_eq!(p.mechanism(), Mechanism::Memcpy);
    p.transfer_blocking(0, 0, 1 << 16).unwrap();
    assert_eq!(&cc.bytes().unwrap()[..], &pattern(1 << 16, 5)[..]);
    pm.sync().unwrap();
    // The mapping is the file: its bytes are on "persistent" storage.
    assert_eq!(
        std::fs::read(dir.path().join("pmem")).unwrap(),
        pattern(1 << 16, 5)
    );
    // A file into pmem goes through the file mechanism straight into the mapping.
    let src = dir.path().join("src");
    std::fs::write(&src, pattern(1 << 16, 8)).unwrap();
    let f = Locator::file(&src, FileOptions::default()).unwrap();
    rt.pipe(&f, &pm, PipeOptions::default())
        .unwrap()
        .transfer_blocking(0, 0, 1 << 16)
        .unwrap();
    assert_eq!(&pm.bytes().unwrap()[..], &pattern(1 << 16, 8)[..]);
}

#[test]
fn bad_locators_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    match Locator::file(dir.path().join("missing"), FileOptions::default()) {
        Err(Error::BadLocator { what, reason }) => {
            assert!(what.contains("missing"), "{what}");
            assert!(reason.contains("No such file"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(Locator::dram(0), Err(Error::BadLocator { .. })));
    assert!(matches!(
        Locator::file(dir.path(), FileOptions::default()),
        Err(Error::BadLocator { .. })
    ));
    assert!(matches!(
        Locator::core_cache(100_000, None),
        Err(Error::BadLocator { .. })
    ));
    assert!(matches!(
        Runtime::new(RuntimeOptions {
            queue_depth: 0,
            ..Default::default()
        }),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        Runtime::new(RuntimeOptions {
            block_bytes: 3000,
            ..Default::default()
        }),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn short_files_and_ranges_outside_memory_are_refused_before_any_io() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short");
    std::fs::write(&path, vec![1u8; 10_000]).unwrap();
    for m in MECHS {
        let rt = runtime(MechanismChoice::Only(m));
        let f = Locator::file(&path, FileOptions::default()).unwrap();
        let mem = Locator::dram(1 << 16).unwrap();
        let p = rt.pipe(&f, &mem, PipeOptions::default()).unwrap();
        match p.transfer(8192, 0, 4096) {
            Err(Error::ShortFile {
                offset,
                len,
                file_len,
                ..
            }) => {
                assert_eq!((offset, len, file_len), (8192, 4096, 10_000));
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
        assert!(matches!(
            p.transfer(0, 65_000, 4096),
            Err(Error::OutOfRange { .. })
        ));
        assert!(matches!(
            p.transfer(0, 0, 0),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(p.state().requests_done, 0);
    }
}

#[test]
fn full_disks_give_no_space_errors() {
    // /dev/full fails every write with ENOSPC.
    for m in [Mechanism::IoUring, Mechanism::Threads] {
        let rt = runtime(MechanismChoice::Only(m));
        let full = Locator::file(
            "/dev/full",
            FileOptions {
                write: true,
                ..Default::default()
            },
        )
        .unwrap();
        let mem = Locator::dram(1 << 16).unwrap();
        let p = rt.pipe(&mem, &full, PipeOptions::default()).unwrap();
        match p.transfer_blocking(0, 0, 1 << 16) {
            Err(Error::NoSpace { path, .. }) => assert_eq!(path, Path::new("/dev/full")),
            other => panic!("{m}: {other:?}"),
        }
        assert_eq!(p.state().transfers_failed, 1);
    }
    // A tiny tmpfs (when this process may mount one) fills up for every mechanism, mmap too.
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("tiny");
    std::fs::create_dir(&mnt).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&mnt)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipping the tmpfs part: cannot mount here");
        return;
    }
    for m in MECHS {
        let rt = runtime(MechanismChoice::Only(m));
        let out = mnt.join(format!("out-{m}"));
        let dst = rw(&out, FileOptions::default());
        let mem = Locator::dram(1 << 20).unwrap();
        let p = rt.pipe(&mem, &dst, PipeOptions::default()).unwrap();
        let r = p.transfer_blocking(0, 0, 1 << 20);
        assert!(matches!(r, Err(Error::NoSpace { .. })), "{m}: {r:?}");
        std::fs::remove_file(&out).unwrap();
    }
    let _ = std::process::Command::new("umount").arg(&mnt).status();
}

#[test]
fn paths_the_runtime_cannot_serve_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    std::fs::write(&a, b"x").unwrap();
    let rt = runtime(MechanismChoice::Auto);
    let fa = Locator::file(&a, FileOptions::default()).unwrap();
    let fb = rw(&dir.path().join("b"), FileOptions::default());
    match rt.pipe(&fa, &fb, PipeOptions::default()) {
        Err(Error::Unsupported { reason, .. }) => assert!(reason.contains("compose"), "{reason}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    let mem = Locator::dram(4096).unwrap();
    match rt.pipe(&mem, &fa, PipeOptions::default()) {
        Err(Error::Unsupported { reason, .. }) => assert!(reason.contains("read-only"), "{reason}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert!(matches!(
        rt.pipe(
            &fa,
            &mem,
            PipeOptions {
                queue_depth: Some(9),
                ..Default::default()
            }
        ),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn a_chain_copies_file_to_file_through_staging_memory() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(300_000, 4);
    std::fs::write(dir.path().join("a"), &data).unwrap();
    let rt = runtime(MechanismChoice::Auto);
    let a = Locator::file(dir.path().join("a"), FileOptions::default()).unwrap();
    let b = rw(&dir.path().join("b"), FileOptions::default());
    let stage = Locator::dram(64 * 1024).unwrap();
    let chain = Chain::new(
        rt.pipe(&a, &stage, PipeOptions::default()).unwrap(),
        rt.pipe(&stage, &b, PipeOptions::default()).unwrap(),
    )
    .unwrap();
    assert_eq!(chain.transfer_blocking(0, 0, 300_000).unwrap(), 300_000);
    assert_eq!(std::fs::read(dir.path().join("b")).unwrap(), data);
}

#[test]
fn borrowed_bytes_and_transfers_exclude_each_other() {
    let rt = runtime(MechanismChoice::Auto);
    let a = Locator::dram(1 << 16).unwrap();
    let b = Locator::dram(1 << 16).unwrap();
    let p = rt.pipe(&a, &b, PipeOptions::default()).unwrap();
    let guard = a.bytes().unwrap();
    assert!(matches!(p.transfer(0, 0, 10), Err(Error::Busy { .. })));
    assert!(matches!(a.bytes(), Err(Error::Busy { .. })));
    drop(guard);
    p.transfer_blocking(0, 0, 10).unwrap();
    assert_eq!(a.transfers_in_flight(), 0);
}

#[test]
fn the_ready_fd_counts_finished_transfers() {
    let rt = runtime(MechanismChoice::Auto);
    let a = Locator::dram(1 << 16).unwrap();
    let b = Locator::dram(1 << 16).unwrap();
    let p = rt.pipe(&a, &b, PipeOptions::default()).unwrap();
    for _ in 0..3 {
        p.transfer(0, 0, 4096).unwrap().wait().unwrap();
    }
    let mut pfd = libc::pollfd {
        fd: p.ready_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 1);
    let mut n = 0u64;
    // SAFETY: reading the eventfd's 8-byte counter.
    assert_eq!(
        unsafe { libc::read(p.ready_fd(), (&mut n as *mut u64).cast(), 8) },
        8
    );
    assert_eq!(n, 3);
}

#[test]
fn random_block_segments_land_where_declared() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(1 << 20, 2);
    std::fs::write(dir.path().join("f"), &data).unwrap();
    for m in MECHS {
        let rt = runtime(MechanismChoice::Only(m));
        let f = Locator::file(dir.path().join("f"), FileOptions::default()).unwrap();
        let mem = Locator::dram(64 * 4096).unwrap();
        let p = rt
            .pipe(
                &f,
                &mem,
                PipeOptions {
                    block_bytes: Some(4096),
                    ..Default::default()
                },
            )
            .unwrap();
        let segs: Vec<(u64, u64, u64)> = (0..64u64)
            .map(|i| (((i * 37) % 256) * 4096, i * 4096, 4096))
            .collect();
        p.transfer_segments(&segs).unwrap().wait().unwrap();
        let got = mem.bytes().unwrap();
        for &(s, d, l) in &segs {
            assert_eq!(
                &got[d as usize..(d + l) as usize],
                &data[s as usize..(s + l) as usize]
            );
        }
    }
}

/// The thread pool takes a transfer whole and the scheduler hears from it only when a transfer
/// ends, so a transfer started while a long one runs must still reach the pool at once (the
/// scheduler is woken for it): it ends while the long one (half a million requests, one at a
/// time) still runs. Without the wake-up it would wait for the long one's end. (The
/// scheduler reaches its wait a few microseconds after it handed the long transfer over; the
/// test starts the short one after 128 requests of the long one ran.)
#[test]
fn threads_a_transfer_started_during_a_long_one_does_not_wait_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, pattern(1 << 20, 5)).unwrap();
    let rt = Runtime::new(RuntimeOptions {
        mechanism: MechanismChoice::Only(Mechanism::Threads),
        queue_depth: 2,
        block_bytes: 4096,
        ..Default::default()
    })
    .unwrap();
    let src = Locator::file(&input, FileOptions::default()).unwrap();
    let small = Locator::dram(512).unwrap();
    let slow = rt
        .pipe(
            &src,
            &small,
            PipeOptions {
                block_bytes: Some(512),
                queue_depth: Some(1),
            },
        )
        .unwrap();
    let segments: Vec<(u64, u64, u64)> = (0..500_000u64)
        .map(|i| ((i * 512) % (1 << 20), 0, 512))
        .collect();
    let long = slow.transfer_segments(&segments).unwrap();
    // The scheduler has handed the long transfer over and gone to wait for its end.
    while long.bytes_done() < 128 * 512 {
        std::thread::yield_now();
    }
    let mem = Locator::dram(4096).unwrap();
    let quick = rt.pipe(&src, &mem, PipeOptions::default()).unwrap();
    assert_eq!(quick.transfer_blocking(4096, 0, 4096).unwrap(), 4096);
    assert!(
        !long.is_done(),
        "the short transfer waited for the long one"
    );
    long.cancel();
    match long.wait() {
        Err(Error::Cancelled { bytes_done }) => assert!(bytes_done < 500_000 * 512),
        other => panic!("expected Cancelled, got {other:?}"),
    }
    assert_eq!(slow.state().transfers_cancelled, 1);
    assert_eq!(slow.state().requests_in_flight, 0);
    assert_eq!(&mem.bytes().unwrap()[..], &pattern(1 << 20, 5)[4096..8192]);
}
