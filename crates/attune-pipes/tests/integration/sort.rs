//! The external sort: right order and the same records under every configuration; bad input,
//! cancellation and full disks leave nothing under the final name (nor temporary files).
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use attune_pipes::sort::{sort_file, SortOptions};
use attune_pipes::{Error, Mechanism, MechanismChoice, MergeSelect, RuntimeOptions};
use attune_workload::records;

fn make_input(path: &Path, n: u64, seed: u64) -> Vec<u8> {
    let mut buf = vec![0u8; n as usize * 100];
    records::fill(seed, 0, &mut buf);
    std::fs::write(path, &buf).unwrap();
    buf
}

fn check_sorted(input: &[u8], output: &[u8]) {
    assert_eq!(input.len(), output.len());
    let keys: Vec<&[u8]> = output.chunks_exact(100).map(|r| &r[..10]).collect();
    assert!(
        keys.windows(2).all(|w| w[0] <= w[1]),
        "output keys out of order"
    );
    let mut a: Vec<&[u8]> = input.chunks_exact(100).collect();
    let mut b: Vec<&[u8]> = output.chunks_exact(100).collect();
    a.sort_unstable();
    b.sort_unstable();
    assert!(a == b, "output records differ from the input's");
}

fn small(m: Option<Mechanism>) -> SortOptions {
    SortOptions {
        memory_bytes_max: 2 << 20,
        run_bytes: Some(10_000),
        threads: 2,
        runtime: RuntimeOptions {
            mechanism: m.map_or(MechanismChoice::Auto, MechanismChoice::Only),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

#[test]
fn spilled_runs_merge_in_one_pass_when_the_memory_holds_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let data = make_input(&input, 80_000, 12);
    let out = dir.path().join("out");
    let wide = SortOptions {
        memory_bytes_max: 4 << 20,
        block_bytes: 102_400,
        run_bytes: Some(10_000),
        threads: 2,
        ..Default::default()
    };
    let rep = sort_file(&input, &out, &wide, None).unwrap();
    check_sorted(&data, &std::fs::read(&out).unwrap());
    assert!(rep.spilled_runs > 4, "{rep:?}");
    assert_eq!(rep.merge_passes, 1, "{rep:?}");
    assert_eq!(rep.merge_fan_in as u64, rep.spilled_runs, "{rep:?}");
    // The chapter's 4-way rule on disk: more passes, the same bytes.
    let four = SortOptions {
        merge_fan_in: Some(4),
        ..wide
    };
    let out4 = dir.path().join("out4");
    let rep4 = sort_file(&input, &out4, &four, None).unwrap();
    assert!(rep4.merge_passes >= 2, "{rep4:?}");
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&out4).unwrap());
}

#[test]
fn every_merge_selector_gives_a_stable_sort_with_many_equal_keys() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    // 40,000 records whose keys take 37 values: long runs of ties inside and across runs. The
    // payload keeps each record's input position, so a stable sort has one right answer.
    let n = 40_000u64;
    let mut data = vec![0u8; n as usize * 100];
    records::fill(21, 0, &mut data);
    for (i, r) in data.chunks_exact_mut(100).enumerate() {
        let k = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) % 37;
        r[..10].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, k as u8]);
        r[10..18].copy_from_slice(&(i as u64).to_be_bytes());
    }
    std::fs::write(&input, &data).unwrap();
    let mut want: Vec<&[u8]> = data.chunks_exact(100).collect();
    want.sort_by(|a, b| a[..10].cmp(&b[..10])); // stable
    let want: Vec<u8> = want.concat();
    for select in [MergeSelect::LoserTree, MergeSelect::Heap, MergeSelect::Scan] {
        for merge_fan_in in [Some(2), Some(3), Some(7), None] {
            let opts = SortOptions {
                memory_bytes_max: 4 << 20,
                block_bytes: 102_400,
                run_bytes: Some(7_000),
                threads: 2,
                merge_fan_in,
                merge_select: select,
                ..Default::default()
            };
            let out = dir.path().join("out");
            let rep = sort_file(&input, &out, &opts, None).unwrap();
            assert!(rep.spilled_runs > 3, "{rep:?}");
            assert_eq!(rep.merge_select, select.name());
            assert!(
                std::fs::read(&out).unwrap() == want,
                "{select:?} merge_fan_in={merge_fan_in:?}: not the stable sort"
            );
        }
    }
}

#[test]
fn sorts_with_several_merge_passes_in_every_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let data = make_input(&input, 50_000, 11);
    let mut first: Option<Vec<u8>> = None;
    let configs: Vec<(&str, SortOptions)> = vec![
        ("default", small(None)),
        ("io_uring", small(Some(Mechanism::IoUring))),
        ("threads", small(Some(Mechanism::Threads))),
        ("mmap", small(Some(Mechanism::Mmap))),
        (
            "buffered (no O_DIRECT)",
            SortOptions {
                direct_io: false,
                ..small(None)
            },
        ),
        (
            "no double buffering",
            SortOptions {
                double_buffering: false,
                ..small(None)
            },
        ),
        (
            "no early spill",
            SortOptions {
                early_spill: false,
                ..small(None)
            },
        ),
        (
            "fan-in 2",
            SortOptions {
                fan_in: 2,
                merge_fan_in: Some(2),
                ..small(None)
            },
        ),
        (
            "one thread, big cache runs",
            SortOptions {
                threads: 1,
                run_bytes: Some(1 << 20),
                ..small(None)
            },
        ),
    ];
    for (name, opts) in configs {
        let out = dir.path().join("out");
        let rep = sort_file(&input, &out, &opts, None).unwrap();
        let got = std::fs::read(&out).unwrap();
        check_sorted(&data, &got);
        assert_eq!(rep.records, 50_000, "{name}");
        assert!(rep.spilled_runs > opts.fan_in as u64, "{name}: {rep:?}");
        assert!(rep.merge_passes >= 2, "{name}: {rep:?}");
        if name == "buffered (no O_DIRECT)" || name == "mmap" {
            assert!(!rep.direct_io, "{name}: {rep:?}");
        }
        // Keys are distinct, so every configuration writes the same bytes.
        match &first {
            None => first = Some(got),
            Some(f) => assert!(f == &got, "{name} differs"),
        }
        assert!(
            leftovers(dir.path()).is_empty(),
            "{name}: {:?}",
            leftovers(dir.path())
        );
    }
}

#[test]
fn input_that_fits_in_memory_is_sorted_without_spilling() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let data = make_input(&input, 3_000, 5);
    let out = dir.path().join("out");
    let rep = sort_file(&input, &out, &SortOptions::default(), None).unwrap();
    check_sorted(&data, &std::fs::read(&out).unwrap());
    assert_eq!((rep.spilled_runs, rep.merge_passes), (0, 0));
    // Empty input: empty output.
    std::fs::write(&input, b"").unwrap();
    sort_file(&input, &out, &SortOptions::default(), None).unwrap();
    assert_eq!(std::fs::read(&out).unwrap().len(), 0);
}

#[test]
fn bad_input_and_bad_options_leave_the_old_output_alone() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, vec![b'x'; 250]).unwrap();
    let out = dir.path().join("out");
    std::fs::write(&out, b"previous").unwrap();
    match sort_file(&input, &out, &SortOptions::default(), None) {
        Err(Error::BadInput { reason, .. }) => assert!(reason.contains("250 bytes"), "{reason}"),
        other => panic!("{other:?}"),
    }
    match sort_file(
        &dir.path().join("missing"),
        &out,
        &SortOptions::default(),
        None,
    ) {
        Err(Error::BadLocator { .. }) => {}
        other => panic!("{other:?}"),
    }
    std::fs::write(&input, vec![b'x'; 300]).unwrap();
    let tiny = SortOptions {
        memory_bytes_max: 100_000,
        ..Default::default()
    };
    assert!(matches!(
        sort_file(&input, &out, &tiny, None),
        Err(Error::InvalidArgument(_))
    ));
    let k1 = SortOptions {
        fan_in: 1,
        ..Default::default()
    };
    assert!(matches!(
        sort_file(&input, &out, &k1, None),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(std::fs::read(&out).unwrap(), b"previous");
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

#[test]
fn a_cancelled_sort_leaves_no_output_and_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    make_input(&input, 20_000, 3);
    let out = dir.path().join("out");
    let cancel = Arc::new(AtomicBool::new(false));
    let opts = SortOptions {
        cancel: Some(Arc::clone(&cancel)),
        ..small(None)
    };
    // Cancel from the progress callback once the merge has begun: deterministic, mid-sort.
    let progress = |phase: &str, _done: u64, _total: u64| {
        if phase.starts_with("merge") {
            cancel.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    };
    match sort_file(&input, &out, &opts, Some(&progress)) {
        Err(Error::Cancelled { .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(!out.exists());
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

#[test]
fn a_full_disk_fails_the_sort_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    make_input(&input, 20_000, 4);
    let mnt = dir.path().join("tiny");
    std::fs::create_dir(&mnt).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&mnt)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipping: cannot mount a tmpfs here");
        return;
    }
    let out = mnt.join("out");
    let r = sort_file(&input, &out, &small(None), None);
    let left = leftovers(&mnt);
    let exists = out.exists();
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    assert!(matches!(r, Err(Error::NoSpace { .. })), "{r:?}");
    assert!(left.is_empty(), "{left:?}");
    assert!(!exists, "a partial output under the final name");
}
