//! CPU (user + system) and wall time per durable 4 KiB append by one writer, three ways: `pwrite`
//! then `fdatasync` (what Plush's `write` back end issues per group), one `pwritev2` with
//! `RWF_DSYNC` (the sync inside the write), and one `io_uring` submission of a write linked to a
//! data sync. The file is allocated first (`posix_fallocate`), as Plush's log chunks are; three
//! rounds, the modes interleaved. Usage: `sync-probe DIR N` (N appends per mode and round).
use io_uring::{opcode, types, IoUring};
use std::os::unix::io::AsRawFd;
use std::time::Instant;

fn cpu() -> (f64, f64) {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    (t(u.ru_utime), t(u.ru_stime))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = &args[1];
    let n: usize = args[2].parse().unwrap();
    let modes = ["pwrite+fdatasync", "pwritev2-dsync", "uring-linked"];
    let buf = vec![7u8; 4096];
    for round in 0..3 {
        for mode in modes {
            let path = format!("{dir}/sync-probe-{mode}");
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            let fd = f.as_raw_fd();
            unsafe { libc::posix_fallocate(fd, 0, (n * 4096) as i64) };
            f.sync_all().unwrap();
            let mut ring = IoUring::new(8).unwrap();
            let (u0, s0) = cpu();
            let t0 = Instant::now();
            for i in 0..n {
                let off = (i * 4096) as i64;
                match mode {
                    "pwrite+fdatasync" => unsafe {
                        assert_eq!(libc::pwrite(fd, buf.as_ptr().cast(), 4096, off), 4096);
                        assert_eq!(libc::fdatasync(fd), 0);
                    },
                    "pwritev2-dsync" => unsafe {
                        let iov = libc::iovec {
                            iov_base: buf.as_ptr() as *mut _,
                            iov_len: 4096,
                        };
                        assert_eq!(libc::pwritev2(fd, &iov, 1, off, libc::RWF_DSYNC), 4096);
                    },
                    _ => {
                        let w = opcode::Write::new(types::Fd(fd), buf.as_ptr(), 4096)
                            .offset(off as u64)
                            .build()
                            .flags(io_uring::squeue::Flags::IO_LINK)
                            .user_data(1);
                        let s = opcode::Fsync::new(types::Fd(fd))
                            .flags(types::FsyncFlags::DATASYNC)
                            .build()
                            .user_data(2);
                        unsafe {
                            ring.submission().push(&w).unwrap();
                            ring.submission().push(&s).unwrap();
                        }
                        ring.submit_and_wait(2).unwrap();
                        for c in ring.completion() {
                            assert!(c.result() >= 0, "{}", c.result());
                        }
                    }
                }
            }
            let wall = t0.elapsed().as_secs_f64();
            let (u1, s1) = cpu();
            println!(
                "round {round} {mode:18} n {n}: cpu {:.1} us/op (user {:.1}, sys {:.1}), wall {:.1} us/op",
                (u1 - u0 + s1 - s0) * 1e6 / n as f64,
                (u1 - u0) * 1e6 / n as f64,
                (s1 - s0) * 1e6 / n as f64,
                wall * 1e6 / n as f64
            );
            drop(f);
            std::fs::remove_file(&path).unwrap();
        }
    }
}
