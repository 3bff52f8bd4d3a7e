//! The engine on the simulated SSD ([`DeviceEnv`]): data round-trips through writes, flushes,
//! a reopen and scans; the device sees the writes; the tuned layout programs fewer flash pages
//! than the file-system default for the same work; scans served by prefetches count as hits.

#![allow(clippy::unwrap_used)]

use crate::support::count_from_first;
use attune_io::ssd::SsdParams;
use attune_kv::env::{DeviceEnv, DeviceLayout, Env, MemEnv};
use attune_kv::{Options, ReadOptions, DB};
use std::path::Path;
use std::sync::Arc;

fn params() -> SsdParams {
    SsdParams {
        chunk_bytes: 64 << 10,
        page_bytes: 16 << 10,
        stripe_chips: 4,
        map_fetch_us: 10.0,
        ..SsdParams::default()
    }
}

fn opts() -> Options {
    Options {
        write_buffer_size: 1 << 20,
        wal_sync_interval_ms: 0,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_003).into_bytes()
}

fn fill(layout: DeviceLayout) -> (Arc<DeviceEnv>, Arc<MemEnv>) {
    let mem = Arc::new(MemEnv::new());
    let env = Arc::new(DeviceEnv::new(mem.clone(), params(), 3, layout).unwrap());
    let db = DB::open_with_env(env.clone(), Path::new("/db"), opts()).unwrap();
    for i in 0..3000u64 {
        let v = if i % 3 == 0 {
            vec![b'v'; 2000]
        } else {
            vec![b's'; 100]
        };
        db.put(&key(i), &v).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    drop(db);
    (env, mem)
}

#[test]
fn round_trip_and_device_counts() {
    let (env, _mem) = fill(DeviceLayout::default());
    let s = env.stats();
    assert!(
        s.writes > 0 && s.flash_pages >= s.min_flash_pages && s.clock_ns > 0,
        "{s:?}"
    );
    let db = DB::open_with_env(env.clone(), Path::new("/db"), opts()).unwrap();
    for i in (0..3000u64).step_by(7) {
        let v = db.get(&key(i)).unwrap().unwrap();
        assert_eq!(v.len(), if i % 3 == 0 { 2000 } else { 100 });
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    assert_eq!(count_from_first(&mut it), 3000);
    assert!(env.stats().reads > 0);
}

#[test]
fn tuned_layout_programs_fewer_flash_pages() {
    let tuned = DeviceLayout {
        align_bytes: 256 << 10,
        extent_bytes: 1 << 20,
        write_bytes: 256 << 10,
    };
    let (a, _) = fill(DeviceLayout::default());
    let (b, _) = fill(tuned);
    let (sa, sb) = (a.stats(), b.stats());
    assert!(
        sb.write_amplification() < sa.write_amplification(),
        "{sa:?} {sb:?}"
    );
    assert!(b.layout() == tuned && a.layout() == DeviceLayout::default());
}

#[test]
fn recording_gives_the_device_trace() {
    let mem = Arc::new(MemEnv::new());
    let env = DeviceEnv::new(mem, params(), 3, DeviceLayout::default()).unwrap();
    env.set_recording(true);
    env.create_dir_all(Path::new("/d")).unwrap();
    let mut f = env.new_writable(Path::new("/d/x")).unwrap();
    f.append(&[1u8; 5000]).unwrap();
    f.sync().unwrap();
    drop(f);
    let r = env.open_random(Path::new("/d/x")).unwrap();
    let mut buf = [0u8; 100];
    r.read_exact_at(&mut buf, 4090).unwrap();
    let t = env.set_recording(false);
    assert_eq!(t.len(), 2, "{t:?}");
    assert!(t[0].write && t[0].size == 8192);
    assert!(!t[1].write && t[1].offset == t[0].offset + 4090 && t[1].size == 100);
}
