//! Small pieces every layer uses: byte coding, file names, Zstd contexts and the per-step lookup
//! timing. Nothing here knows about tables, logs or the database.

pub mod coding;
pub mod filename;
pub mod steps;
pub(crate) mod zstd_ctx;

/// A key for an error message: printable ASCII as is, else hex; long keys shortened.
pub(crate) fn show_key(k: &[u8]) -> String {
    const SHOWN_BYTES_MAX: usize = 64;
    let cut = &k[..k.len().min(SHOWN_BYTES_MAX)];
    let more = if k.len() > SHOWN_BYTES_MAX { "…" } else { "" };
    if cut.iter().all(|b| (0x20..0x7f).contains(b)) {
        format!("{:?}{more}", String::from_utf8_lossy(cut))
    } else {
        let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}{more}")
    }
}
