//! The external sort of lines: the output is the byte-wise sort of the input's lines (what
//! `LC_ALL=C sort` gives) under every configuration; the edges (empty input, a last line
//! without `\n`, lines too long for a block) are defined; bad input and cancellation leave
//! nothing under the final name.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use attune_pipes::sort::{sort_file, RecordFormat, SortOptions};
use attune_pipes::{Error, Mechanism, MechanismChoice, MergeSelect, RuntimeOptions};
use attune_workload::rng::Xoshiro256;

/// The reference: the input's lines (a missing last `\n` added) sorted as byte strings.
fn reference(input: &[u8]) -> Vec<u8> {
    let mut lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    if input.ends_with(b"\n") || input.is_empty() {
        lines.pop();
    }
    lines.sort_unstable();
    let mut out = Vec::with_capacity(input.len() + 1);
    for l in lines {
        out.extend_from_slice(l);
        out.push(b'\n');
    }
    out
}

/// Lines of random lengths: many short (empty among them), some repeated, a few long ones up
/// to `long_max` bytes; characters from a small alphabet (long shared prefixes, ties beyond 8
/// bytes) or any byte but `\n` (the 0x00 and 0xFF extremes included).
fn random_lines(seed: u64, bytes: usize, long_max: usize) -> Vec<u8> {
    let mut rng = Xoshiro256::new(seed, 1);
    let mut out = Vec::with_capacity(bytes + long_max);
    let mut earlier: Vec<(usize, usize)> = Vec::new();
    while out.len() < bytes {
        let kind = rng.below(100);
        if kind < 10 && !earlier.is_empty() {
            // A duplicate of an earlier line.
            let (a, b) = earlier[rng.below(earlier.len() as u64) as usize];
            out.extend_from_within(a..b);
            out.push(b'\n');
            continue;
        }
        let len = match kind {
            0..=19 => 0,
            20..=69 => rng.below(12) as usize,
            70..=97 => rng.below(300) as usize,
            _ => rng.below(long_max as u64) as usize,
        };
        let narrow = rng.below(2) == 0;
        let start = out.len();
        for _ in 0..len {
            let b = if narrow {
                b'a' + rng.below(3) as u8
            } else {
                match rng.below(255) as u8 {
                    b'\n' => 0xFF,
                    b => b,
                }
            };
            out.push(b);
        }
        earlier.push((start, out.len()));
        out.push(b'\n');
    }
    out
}

fn lines(m: Option<Mechanism>) -> SortOptions {
    SortOptions {
        format: RecordFormat::Lines,
        memory_bytes_max: 2 << 20,
        block_bytes: 102_400,
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

fn sort_bytes(dir: &Path, input: &[u8], opts: &SortOptions) -> (Vec<u8>, u64, u64) {
    let inp = dir.join("in");
    std::fs::write(&inp, input).unwrap();
    let out = dir.join("out");
    let rep = sort_file(&inp, &out, opts, None).unwrap();
    assert_eq!(rep.format, "lines");
    assert!(
        leftovers(dir).is_empty(),
        "{:?} left behind",
        leftovers(dir)
    );
    (
        std::fs::read(&out).unwrap(),
        rep.spilled_runs,
        rep.merge_passes,
    )
}

#[test]
fn random_lines_sort_like_a_reference_sort_in_every_configuration() {
    let configs: Vec<(&str, SortOptions)> = vec![
        ("auto", lines(None)),
        ("io_uring", lines(Some(Mechanism::IoUring))),
        ("threads", lines(Some(Mechanism::Threads))),
        ("mmap", lines(Some(Mechanism::Mmap))),
        (
            "no double buffering",
            SortOptions {
                double_buffering: false,
                ..lines(None)
            },
        ),
        (
            "no early spill",
            SortOptions {
                early_spill: false,
                ..lines(None)
            },
        ),
        (
            "page cache",
            SortOptions {
                direct_io: false,
                ..lines(None)
            },
        ),
        (
            "fan-in 2",
            SortOptions {
                merge_fan_in: Some(2),
                ..lines(None)
            },
        ),
    ];
    for seed in 1..=3u64 {
        // About five buffers of input: lines cut by buffer ends, several runs and passes.
        let input = random_lines(seed, 3_000_000 + seed as usize * 777, 90_000);
        let want = reference(&input);
        for (name, o) in &configs {
            let dir = tempfile::tempdir().unwrap();
            let (got, runs, passes) = sort_bytes(dir.path(), &input, o);
            assert!(
                got == want,
                "seed {seed} {name}: output differs from the reference"
            );
            // Double buffering off gives one buffer room for both: fewer, longer runs.
            assert!(runs >= 3 && passes >= 1, "seed {seed} {name}: {runs} runs");
            if o.double_buffering {
                assert!(
                    runs > 4 && passes >= 2,
                    "seed {seed} {name}: {runs} runs, {passes}"
                );
            }
        }
    }
}

#[test]
fn short_lines_fill_the_index_before_the_buffer_and_spill_more_runs() {
    // 1.5 MB of lines of 0-3 bytes: more lines per buffer than its index holds.
    let mut rng = Xoshiro256::new(9, 2);
    let mut input = Vec::new();
    while input.len() < 1_500_000 {
        for _ in 0..rng.below(4) {
            input.push(b'0' + rng.below(4) as u8);
        }
        input.push(b'\n');
    }
    let dir = tempfile::tempdir().unwrap();
    let (got, runs, _) = sort_bytes(dir.path(), &input, &lines(None));
    assert!(got == reference(&input));
    assert!(runs > input.len() as u64 / 614_400, "{runs} runs");
}

#[test]
fn small_inputs_and_edges_have_defined_outputs() {
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        ("empty file", vec![], vec![]),
        ("one empty line", b"\n".to_vec(), b"\n".to_vec()),
        ("empty lines", b"\n\n\n".to_vec(), b"\n\n\n".to_vec()),
        ("no newline at all", b"abc".to_vec(), b"abc\n".to_vec()),
        (
            "last line unterminated",
            b"b\na\nc".to_vec(),
            b"a\nb\nc\n".to_vec(),
        ),
        (
            "prefix sorts first, bytes unsigned",
            b"ab\na\n\xff\n\x00\nabcdefghij\nabcdefghi\n".to_vec(),
            b"\x00\na\nab\nabcdefghi\nabcdefghij\n\xff\n".to_vec(),
        ),
        (
            "carriage returns are bytes",
            b"b\r\na\r\n".to_vec(),
            b"a\r\nb\r\n".to_vec(),
        ),
    ];
    for (name, input, want) in cases {
        for direct_io in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let o = SortOptions {
                direct_io,
                ..lines(None)
            };
            let (got, _, _) = sort_bytes(dir.path(), &input, &o);
            assert_eq!(got, want, "{name} (direct_io {direct_io})");
        }
    }
    // An unterminated last line cut by a buffer's end (the input spans several buffers).
    let mut input = random_lines(4, 1_400_000, 2_000);
    input.extend_from_slice(&[b'z'; 5_000]);
    let dir = tempfile::tempdir().unwrap();
    let (got, _, _) = sort_bytes(dir.path(), &input, &lines(None));
    assert!(got == reference(&input));
    assert_eq!(got.len(), input.len() + 1);
}

#[test]
fn a_line_of_one_block_sorts_and_a_longer_one_is_refused_with_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let o = lines(None);
    // Exactly one block with its `\n`, placed across the first buffer's end (614,400 bytes).
    let mut input = random_lines(5, 600_000, 100);
    input.extend(std::iter::repeat_n(b'q', 102_399));
    input.push(b'\n');
    input.extend(random_lines(6, 200_000, 100));
    let (got, _, _) = sort_bytes(dir.path(), &input, &o);
    assert!(got == reference(&input));

    let out = dir.path().join("out");
    std::fs::write(&out, b"previous").unwrap();
    for (name, at_start, len) in [
        ("inside a buffer", 1_000usize, 150_000usize),
        ("across a buffer's end", 600_000, 102_400),
        ("unterminated at the end", 1_000, 0),
    ] {
        let mut input = random_lines(7, at_start, 50);
        let off = input.len();
        if len == 0 {
            input.extend(std::iter::repeat_n(b'u', 200_000));
        } else {
            input.extend(std::iter::repeat_n(b'L', len));
            input.push(b'\n');
            input.extend(random_lines(8, 10_000, 50));
        }
        let inp = dir.path().join("in");
        std::fs::write(&inp, &input).unwrap();
        match sort_file(&inp, &out, &o, None) {
            Err(Error::BadInput { reason, .. }) => {
                assert!(
                    reason.contains(&format!("at byte {off} ")) && reason.contains("block_bytes"),
                    "{name}: {reason}"
                );
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(std::fs::read(&out).unwrap(), b"previous", "{name}");
        assert!(leftovers(dir.path()).is_empty(), "{name}");
    }
}

#[test]
fn bad_options_for_lines_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in");
    std::fs::write(&inp, b"b\na\n").unwrap();
    let out = dir.path().join("out");
    let tree = SortOptions {
        merge_select: MergeSelect::LoserTree,
        ..lines(None)
    };
    assert!(matches!(
        sort_file(&inp, &out, &tree, None),
        Err(Error::InvalidArgument(_))
    ));
    let tiny = SortOptions {
        memory_bytes_max: 1 << 20,
        ..lines(None)
    };
    match sort_file(&inp, &out, &tiny, None) {
        Err(Error::InvalidArgument(r)) => assert!(r.contains("too small"), "{r}"),
        other => panic!("{other:?}"),
    }
    assert!(!out.exists());
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn a_cancelled_sort_of_lines_leaves_no_output_and_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in");
    std::fs::write(&inp, random_lines(10, 3_000_000, 1_000)).unwrap();
    let out = dir.path().join("out");
    let cancel = Arc::new(AtomicBool::new(false));
    let opts = SortOptions {
        cancel: Some(Arc::clone(&cancel)),
        ..lines(None)
    };
    let progress = |phase: &str, _done: u64, _total: u64| {
        if phase.starts_with("merge") {
            cancel.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    };
    match sort_file(&inp, &out, &opts, Some(&progress)) {
        Err(Error::Cancelled { .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(!out.exists());
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn a_full_disk_fails_the_sort_of_lines_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in");
    std::fs::write(&inp, random_lines(12, 2_000_000, 1_000)).unwrap();
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
    let r = sort_file(&inp, &out, &lines(None), None);
    let left = leftovers(&mnt);
    let exists = out.exists();
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    assert!(matches!(r, Err(Error::NoSpace { .. })), "{r:?}");
    assert!(left.is_empty(), "{left:?}");
    assert!(!exists, "a partial output under the final name");
}
