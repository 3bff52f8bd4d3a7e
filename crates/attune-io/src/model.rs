//! Admission-model weight files and integer-quantised inference.
//!
//! A weight file (`docs/formats/io-model.md`) holds a small multi-layer perceptron: ReLU hidden
//! layers, and either one output (a logit: sigmoid > threshold means "slow, decline") or two (LinnOS:
//! `out[1] - out[0]` is the logit). It is written by the Python trainer (`attune.io.heimdall`) and
//! read here; it is never pickle. Layout, little-endian:
//!
//! ```text
//! 0   magic "ATIOMLP1"                8 bytes
//! 8   version u16 (= 1)
//! 10  input kind u16                  1 = Heimdall (min-max scaled), 2 = LinnOS (digits),
//!                                     3 = TinFetch (10 suffix inputs; output = step / 1024),
//!                                     4 = HeimdallLive (Heimdall's + 3 in-flight features)
//! 12  joint size P u16                1..=9 (1 for LinnOS)
//! 14  layers L u16                    1..=8
//! 16  dims (L + 1) × u32              inputs, hidden..., outputs; each 1..=1024, outputs 1 or 2
//! ..  scale: inputs × (min f32, max f32)
//! ..  per layer: weights f32 [out × in] row-major, bias f32 [out]
//! ..  threshold f32                   in (0, 1): decision threshold on the slow probability
//! ..  crc32c u32                      of every byte before it
//! ```
//!
//! Decoding checks the length against the dimensions before reading, the checksum, finite
//! values and ranges; every failure is [`IoError::CorruptModel`] with the byte offset.
//!
//! **Quantisation** (the chapter's ×1024): inputs are min-max scaled and clipped to [0, 1], then
//! multiplied by 1024 and rounded; every weight and bias is multiplied by 1024 and rounded to
//! `i32`. A layer accumulates in `i64`, divides by 1024 (arithmetic shift) and adds the bias, so
//! every activation stays at scale 1024. The decision compares the output logit with
//! `1024 × ln(threshold / (1 - threshold))`. No floating point runs after input scaling.
//!
//! Thread-safety: a [`QuantizedMlp`] is immutable after loading and can be shared (`Sync`).

use crate::error::{IoError, Result};

/// File magic.
pub const MAGIC: [u8; 8] = *b"ATIOMLP1";
/// Format version this build reads and writes.
pub const VERSION: u16 = 1;
/// Largest layer width.
pub const WIDTH_MAX: u32 = 1024;
/// Largest number of layers.
pub const LAYERS_MAX: u16 = 8;
/// Quantisation scale.
pub const QUANT: i64 = 1024;
const QUANT_SHIFT: u32 = 10;

/// What a model's inputs are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// Heimdall's `10 + P` raw features, min-max scaled.
    Heimdall,
    /// LinnOS's 31 decimal digits.
    LinnOs,
    /// Heimdall's `10 + P` raw features followed by the 3 live (in-flight) features of
    /// [`crate::features::FeatureTracker::live`]: `13 + P` inputs, min-max scaled.
    HeimdallLive,
    /// TinFetch's 10 stream inputs (9 suffixes relative to the newest, the newest absolute; 1 KiB
    /// units); the output is the step to the next suffix ÷ 1024 (see `prefetch::tinfetch`).
    TinFetch,
}

/// A decoded weight file (floating point, as trained).
#[derive(Clone, Debug, PartialEq)]
pub struct MlpFile {
    /// Input encoding.
    pub kind: InputKind,
    /// Joint-inference group size P.
    pub joint: u16,
    /// Layer widths: inputs, hidden..., outputs.
    pub dims: Vec<u32>,
    /// Per-input minimum of the scaling.
    pub scale_min: Vec<f32>,
    /// Per-input maximum of the scaling.
    pub scale_max: Vec<f32>,
    /// Per layer: weights `[out × in]` row-major, then bias `[out]`.
    pub layers: Vec<(Vec<f32>, Vec<f32>)>,
    /// Decision threshold on the slow probability, in (0, 1).
    pub threshold: f32,
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| IoError::CorruptModel {
                offset: self.pos as u64,
                reason: format!("file ends while reading {what}"),
            })?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u16(&mut self, what: &str) -> Result<u16> {
        let s = self.take(2, what)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        let s = self.take(4, what)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn f32s(&mut self, n: usize, what: &str) -> Result<Vec<f32>> {
        let at = self.pos as u64;
        let s = self.take(n * 4, what)?;
        let v: Vec<f32> = s
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(IoError::CorruptModel {
                offset: at + 4 * i as u64,
                reason: format!("{what}: element {i} is {}, not a finite number", v[i]),
            });
        }
        Ok(v)
    }
    /// [`Self::f32s`] whose values must also quantise (|x| at most [`WEIGHT_ABS_MAX`]).
    fn weights(&mut self, n: usize, what: &str) -> Result<Vec<f32>> {
        let at = self.pos as u64;
        let v = self.f32s(n, what)?;
        if let Some(i) = v.iter().position(|x| x.abs() > WEIGHT_ABS_MAX) {
            return Err(IoError::CorruptModel {
                offset: at + 4 * i as u64,
                reason: format!(
                    "{what}: element {i} is {}, too large to quantise (|x| must stay at most \
                     {WEIGHT_ABS_MAX})",
                    v[i]
                ),
            });
        }
        Ok(v)
    }
}

/// The length a file's header declares, when the header is whole and consistent (this version,
/// a known input kind, a joint size, layer count and widths in range, and an input count that
/// matches the kind and joint size); `None` otherwise (the full checks then say what is wrong).
fn declared_len(b: &[u8]) -> Option<usize> {
    let u16_at = |i: usize| Some(u16::from_le_bytes([*b.get(i)?, *b.get(i + 1)?]));
    if u16_at(8)? != VERSION {
        return None;
    }
    let kind = u16_at(10)?;
    let joint = usize::from(u16_at(12)?);
    let n_layers = u16_at(14)?;
    if !(1..=crate::features::JOINT_MAX).contains(&joint) || !(1..=LAYERS_MAX).contains(&n_layers) {
        return None;
    }
    let mut dims = Vec::with_capacity(usize::from(n_layers) + 1);
    for i in 0..=usize::from(n_layers) {
        let at = 16 + 4 * i;
        let d = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?);
        if !(1..=WIDTH_MAX).contains(&d) {
            return None;
        }
        dims.push(d as usize);
    }
    let inputs = match kind {
        1 => 10 + joint,
        2 => crate::features::LINNOS_FEATURES,
        3 => crate::prefetch::tinfetch::HISTORY,
        4 => 10 + crate::features::LIVE_FEATURES + joint,
        _ => return None,
    };
    if dims[0] != inputs {
        return None;
    }
    let params: usize = dims.windows(2).map(|w| w[0] * w[1] + w[1]).sum();
    Some(16 + 4 * dims.len() + 8 * dims[0] + 4 * params + 8)
}

impl MlpFile {
    /// Number of inputs.
    pub fn inputs(&self) -> usize {
        self.dims.first().copied().unwrap_or(0) as usize
    }

    /// Encodes the file (the inverse of [`MlpFile::decode`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        let kind: u16 = match self.kind {
            InputKind::Heimdall => 1,
            InputKind::LinnOs => 2,
            InputKind::TinFetch => 3,
            InputKind::HeimdallLive => 4,
        };
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&self.joint.to_le_bytes());
        out.extend_from_slice(&(self.layers.len() as u16).to_le_bytes());
        for d in &self.dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        for (lo, hi) in self.scale_min.iter().zip(&self.scale_max) {
            out.extend_from_slice(&lo.to_le_bytes());
            out.extend_from_slice(&hi.to_le_bytes());
        }
        for (w, b) in &self.layers {
            for x in w.iter().chain(b) {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        out.extend_from_slice(&self.threshold.to_le_bytes());
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes and checks a weight file.
    pub fn decode(b: &[u8]) -> Result<Self> {
        let corrupt = |offset: usize, reason: String| IoError::CorruptModel {
            offset: offset as u64,
            reason,
        };
        if b.len() < 8 || b[..8] != MAGIC {
            return Err(corrupt(
                0,
                "bad magic (not an Attune I/O model file)".into(),
            ));
        }
        // A file shorter than its (consistent) header says is truncated: say so, with both
        // lengths, rather than that the bytes where its checksum would be do not match.
        if let Some(total) = declared_len(b) {
            if b.len() < total {
                return Err(corrupt(
                    b.len(),
                    format!("truncated ({} of {total} bytes)", b.len()),
                ));
            }
        }
        // The checksum first: a damaged file is damaged whatever its version field says, and a
        // file of another version (whose trailing checksum is intact) is unsupported, not damaged.
        if b.len() >= 12 {
            let n = b.len() - 4;
            let stored = u32::from_le_bytes([b[n], b[n + 1], b[n + 2], b[n + 3]]);
            if crc32c::crc32c(&b[..n]) != stored {
                return Err(corrupt(n, "checksum mismatch (the file is damaged)".into()));
            }
        }
        let mut c = Cursor { b, pos: 8 };
        let version = c.u16("the version")?;
        if version != VERSION {
            return Err(IoError::UnsupportedModelVersion {
                found: version,
                supported: VERSION,
            });
        }
        let kind = match c.u16("the input kind")? {
            1 => InputKind::Heimdall,
            2 => InputKind::LinnOs,
            3 => InputKind::TinFetch,
            4 => InputKind::HeimdallLive,
            k => return Err(corrupt(10, format!("input kind {k} is not 1, 2, 3 or 4"))),
        };
        let joint = c.u16("the joint size")?;
        if !(1..=crate::features::JOINT_MAX as u16).contains(&joint) {
            return Err(corrupt(12, format!("joint size {joint} is outside 1..=9")));
        }
        let n_layers = c.u16("the layer count")?;
        if !(1..=LAYERS_MAX).contains(&n_layers) {
            return Err(corrupt(
                14,
                format!("layer count {n_layers} is outside 1..={LAYERS_MAX}"),
            ));
        }
        let mut dims = Vec::with_capacity(usize::from(n_layers) + 1);
        for i in 0..=usize::from(n_layers) {
            let at = c.pos;
            let d = c.u32("the layer widths")?;
            if !(1..=WIDTH_MAX).contains(&d) {
                return Err(corrupt(
                    at,
                    format!("width {d} of layer {i} is outside 1..={WIDTH_MAX}"),
                ));
            }
            dims.push(d as usize);
        }
        let outputs = dims[dims.len() - 1];
        if outputs > 2 {
            return Err(corrupt(
                c.pos - 4,
                format!("{outputs} outputs (1 or 2 expected)"),
            ));
        }
        if kind == InputKind::TinFetch && (joint != 1 || outputs != 1) {
            return Err(corrupt(
                12,
                format!("a TinFetch model has joint size 1 and one output ({joint}, {outputs})"),
            ));
        }
        let expected_inputs = match kind {
            InputKind::Heimdall => 10 + usize::from(joint),
            InputKind::HeimdallLive => 10 + crate::features::LIVE_FEATURES + usize::from(joint),
            InputKind::LinnOs => crate::features::LINNOS_FEATURES,
            InputKind::TinFetch => crate::prefetch::tinfetch::HISTORY,
        };
        if dims[0] != expected_inputs {
            return Err(corrupt(
                16,
                format!(
                    "{} inputs, but this input kind and joint size need {expected_inputs}",
                    dims[0]
                ),
            ));
        }
        let params: usize = dims.windows(2).map(|w| w[0] * w[1] + w[1]).sum();
        let total = c.pos + 8 * dims[0] + 4 * params + 4 + 4;
        if b.len() != total {
            return Err(corrupt(
                b.len().min(total),
                format!("file is {} bytes, its dimensions need {total}", b.len()),
            ));
        }
        let stored = u32::from_le_bytes([b[total - 4], b[total - 3], b[total - 2], b[total - 1]]);
        if crc32c::crc32c(&b[..total - 4]) != stored {
            return Err(corrupt(
                total - 4,
                "checksum mismatch (the file is damaged)".into(),
            ));
        }
        let scale_at = c.pos;
        let scale = c.f32s(2 * dims[0], "the input scaling")?;
        let scale_min: Vec<f32> = scale.iter().step_by(2).copied().collect();
        let scale_max: Vec<f32> = scale.iter().skip(1).step_by(2).copied().collect();
        if let Some(i) = (0..dims[0]).find(|&i| scale_min[i] > scale_max[i]) {
            return Err(corrupt(
                scale_at + 8 * i,
                format!(
                    "the input scaling of input {i}: min {} is above max {}",
                    scale_min[i], scale_max[i]
                ),
            ));
        }
        let mut layers = Vec::new();
        for (k, w) in dims.windows(2).enumerate() {
            let weights = c.weights(w[0] * w[1], &format!("the weights of layer {}", k + 1))?;
            let bias = c.weights(w[1], &format!("the biases of layer {}", k + 1))?;
            layers.push((weights, bias));
        }
        let at = c.pos;
        let threshold = c.f32s(1, "the threshold")?[0];
        if !(threshold > 0.0 && threshold < 1.0) {
            return Err(corrupt(
                at,
                format!("threshold {threshold} is outside (0, 1)"),
            ));
        }
        Ok(Self {
            kind,
            joint,
            dims: dims.iter().map(|&d| d as u32).collect(),
            scale_min,
            scale_max,
            layers,
            threshold,
        })
    }
}

/// A model ready for integer inference (see the module documentation).
#[derive(Clone, Debug)]
pub struct QuantizedMlp {
    kind: InputKind,
    joint: u16,
    dims: Vec<usize>,
    lo: Vec<f32>,
    inv_range: Vec<f32>,
    weights: Vec<Vec<i32>>,
    biases: Vec<Vec<i64>>,
    logit_threshold: i64,
    width_max: usize,
    /// The 16-bit copy of the weights, when every accumulation provably fits an `i32`
    /// (checked at load); the fast path.
    narrow: Option<Vec<Vec<i16>>>,
    /// The 16-bit weights in the SSE2 layout (x86-64 only), when `narrow` is set.
    #[cfg(target_arch = "x86_64")]
    packed: Option<sse2::Packed>,
    /// The fixed-shape AVX2 kernel (x86-64 with AVX2, Heimdall's `n → 128 → 16 → 1` only).
    #[cfg(target_arch = "x86_64")]
    fixed: Option<avx2::Fixed>,
}

/// Largest activation of the 16-bit path (scale 1024: real values up to 32).
const ACT16_MAX: i64 = i16::MAX as i64;

/// The 16-bit weights when, for every layer and output, `sum |w| × largest input activation`
/// stays below `i32::MAX` and every weight fits an `i16`.
fn narrow_weights(dims: &[usize], weights: &[Vec<i32>]) -> Option<Vec<Vec<i16>>> {
    let mut act_max: i64 = QUANT;
    let mut out = Vec::new();
    for (l, w) in weights.iter().enumerate() {
        let n_i = dims[l];
        let mut narrow = Vec::with_capacity(w.len());
        for row in w.chunks(n_i.max(1)) {
            let sum: i64 = row.iter().map(|&x| i64::from(x).abs()).sum();
            if sum.checked_mul(act_max)? > i64::from(i32::MAX) {
                return None;
            }
            for &x in row {
                narrow.push(i16::try_from(x).ok()?);
            }
        }
        out.push(narrow);
        act_max = ACT16_MAX;
    }
    Some(out)
}

/// Largest weight or bias magnitude a file may hold: × [`QUANT`] it stays within 2^24, where
/// the integer sums of the quantised layers cannot overflow.
pub const WEIGHT_ABS_MAX: f32 = 16384.0;

fn quant(x: f32, what: &str) -> Result<i32> {
    let q = (f64::from(x) * QUANT as f64).round();
    if q.abs() > f64::from(1i32 << 24) {
        return Err(IoError::CorruptModel {
            offset: 0,
            reason: format!("{what} {x} is too large to quantise (|x| must stay below 16384)"),
        });
    }
    Ok(q as i32)
}

impl QuantizedMlp {
    /// Quantises a decoded file.
    pub fn new(f: &MlpFile) -> Result<Self> {
        let dims: Vec<usize> = f.dims.iter().map(|&d| d as usize).collect();
        let mut weights = Vec::new();
        let mut biases = Vec::new();
        for (w, b) in &f.layers {
            weights.push(
                w.iter()
                    .map(|&x| quant(x, "weight"))
                    .collect::<Result<Vec<_>>>()?,
            );
            biases.push(
                b.iter()
                    .map(|&x| quant(x, "bias").map(i64::from))
                    .collect::<Result<Vec<_>>>()?,
            );
        }
        let t = f64::from(f.threshold);
        let logit_threshold = ((t / (1.0 - t)).ln() * QUANT as f64).round() as i64;
        let inv_range = f
            .scale_min
            .iter()
            .zip(&f.scale_max)
            .map(|(lo, hi)| if hi > lo { 1.0 / (hi - lo) } else { 0.0 })
            .collect();
        let narrow = narrow_weights(&dims, &weights);
        Ok(Self {
            #[cfg(target_arch = "x86_64")]
            fixed: narrow
                .as_ref()
                .and_then(|w| avx2::Fixed::new(&dims, w, &biases)),
            #[cfg(target_arch = "x86_64")]
            packed: narrow
                .as_ref()
                .and_then(|w| sse2::Packed::new(&dims, w, &biases)),
            narrow,
            kind: f.kind,
            joint: f.joint,
            width_max: dims.iter().copied().max().unwrap_or(1),
            dims,
            lo: f.scale_min.clone(),
            inv_range,
            weights,
            biases,
            logit_threshold,
        })
    }

    /// Decodes, checks and quantises a weight file.
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        Self::new(&MlpFile::decode(b)?)
    }

    /// Input encoding.
    pub fn kind(&self) -> InputKind {
        self.kind
    }

    /// Joint-inference group size.
    pub fn joint(&self) -> usize {
        usize::from(self.joint)
    }

    /// Number of raw inputs.
    pub fn inputs(&self) -> usize {
        self.dims[0]
    }

    /// The output logit at scale 1024 for `raw` inputs (`raw.len()` must equal
    /// [`QuantizedMlp::inputs`]; extra values are ignored, missing ones read as 0).
    pub fn logit_q(&self, raw: &[f32]) -> i64 {
        const STACK: usize = 256;
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = &self.fixed {
            let mut x = [0i16; avx2::INPUTS_MAX];
            self.scale_inputs16(raw, &mut x);
            return k.forward(&x);
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(p) = &self.packed {
            let mut x = [0i16; sse2::WIDTH_MAX];
            self.scale_inputs16(raw, &mut x);
            return p.forward(&x);
        }
        if let (Some(w16), true) = (&self.narrow, self.width_max <= STACK) {
            let mut a = [0i16; STACK];
            let mut b = [0i16; STACK];
            return self.forward16(w16, raw, &mut a, &mut b);
        }
        if self.width_max <= STACK {
            let mut a = [0i32; STACK];
            let mut b = [0i32; STACK];
            self.forward(raw, &mut a, &mut b)
        } else {
            let mut a = vec![0i32; self.width_max];
            let mut b = vec![0i32; self.width_max];
            self.forward(raw, &mut a, &mut b)
        }
    }

    fn forward(&self, raw: &[f32], x: &mut [i32], y: &mut [i32]) -> i64 {
        let n_in = self.dims[0];
        for (i, xi) in x[..n_in].iter_mut().enumerate() {
            let v = raw.get(i).copied().unwrap_or(0.0);
            let s = ((v - self.lo[i]) * self.inv_range[i]).clamp(0.0, 1.0);
            *xi = (s * QUANT as f32 + 0.5) as i32;
        }
        let (mut cur, mut next) = (x, y);
        let last = self.weights.len() - 1;
        let mut out = [0i64; 2];
        for (l, (w, b)) in self.weights.iter().zip(&self.biases).enumerate() {
            let (n_i, n_o) = (self.dims[l], self.dims[l + 1]);
            let xin = &cur[..n_i];
            for o in 0..n_o {
                let row = &w[o * n_i..(o + 1) * n_i];
                let acc: i64 = row
                    .iter()
                    .zip(xin)
                    .map(|(&a, &v)| i64::from(a) * i64::from(v))
                    .sum();
                let v = (acc >> QUANT_SHIFT) + b[o];
                if l == last {
                    out[o] = v;
                } else {
                    next[o] = v.clamp(0, i64::from(i32::MAX)) as i32;
                }
            }
            std::mem::swap(&mut cur, &mut next);
        }
        if self.dims[self.dims.len() - 1] == 2 {
            out[1] - out[0]
        } else {
            out[0]
        }
    }

    /// The 16-bit path: `i16` weights and activations, `i32` sums (no overflow: checked at load by
    /// [`narrow_weights`]); hidden activations saturate at 32 (scale 1024).
    fn scale_inputs16(&self, raw: &[f32], x: &mut [i16]) {
        let n_in = self.dims[0];
        for (i, xi) in x[..n_in].iter_mut().enumerate() {
            let v = raw.get(i).copied().unwrap_or(0.0);
            let s = ((v - self.lo[i]) * self.inv_range[i]).clamp(0.0, 1.0);
            // Round half up without a libm call (s >= 0).
            *xi = (s * QUANT as f32 + 0.5) as i16;
        }
    }

    fn forward16(&self, w16: &[Vec<i16>], raw: &[f32], x: &mut [i16], y: &mut [i16]) -> i64 {
        self.scale_inputs16(raw, x);
        let (mut cur, mut next) = (x, y);
        let last = w16.len() - 1;
        let mut out = [0i64; 2];
        for (l, (w, b)) in w16.iter().zip(&self.biases).enumerate() {
            let (n_i, n_o) = (self.dims[l], self.dims[l + 1]);
            let xin = &cur[..n_i];
            for (o, row) in w.chunks_exact(n_i).take(n_o).enumerate() {
                let acc: i32 = row
                    .iter()
                    .zip(xin)
                    .map(|(&a, &v)| i32::from(a) * i32::from(v))
                    .fold(0i32, i32::wrapping_add);
                let v = i64::from(acc >> QUANT_SHIFT) + b[o];
                if l == last {
                    out[o.min(1)] = v;
                } else {
                    next[o] = v.clamp(0, ACT16_MAX) as i16;
                }
            }
            std::mem::swap(&mut cur, &mut next);
        }
        if self.dims[self.dims.len() - 1] == 2 {
            out[1] - out[0]
        } else {
            out[0]
        }
    }

    /// Which inference path runs: `"avx2-fixed"` (AVX2, Heimdall's shape), `"sse2"`, `"i16"`
    /// (portable 16-bit) or `"i64"` (weights too large for the 16-bit bound).
    pub fn kernel(&self) -> &'static str {
        #[cfg(target_arch = "x86_64")]
        {
            if self.fixed.is_some() {
                return "avx2-fixed";
            }
            if self.packed.is_some() {
                return "sse2";
            }
        }
        if self.narrow.is_some() {
            "i16"
        } else {
            "i64"
        }
    }

    /// Whether the model predicts a slow (busy) device: the caller should decline the I/O.
    pub fn predicts_slow(&self, raw: &[f32]) -> bool {
        self.logit_q(raw) > self.logit_threshold
    }

    /// How far the quantised logit is above the decision threshold (scale 1024): positive means
    /// [`QuantizedMlp::predicts_slow`]. Comparable across models with different thresholds, so
    /// routing can rank replicas by it.
    pub fn margin_q(&self, raw: &[f32]) -> i64 {
        self.logit_q(raw) - self.logit_threshold
    }

    /// The slow probability of a margin from [`QuantizedMlp::margin_q`] (the sigmoid of its
    /// logit).
    pub fn slow_probability(&self, margin_q: i64) -> f64 {
        let z = margin_q.saturating_add(self.logit_threshold) as f64 / QUANT as f64;
        1.0 / (1.0 + (-z).exp())
    }

    /// The slow probability implied by the quantised logit (for ROC curves).
    pub fn score(&self, raw: &[f32]) -> f64 {
        let z = self.logit_q(raw) as f64 / QUANT as f64;
        1.0 / (1.0 + (-z).exp())
    }
}

/// The x86-64 kernel: SSE2 (part of every x86-64 CPU) `pmaddwd` over pairs of inputs. Weights
/// are laid out per pair of inputs `k` and output `o` as `[w(o, 2k), w(o, 2k+1)]`, four outputs
/// per 128-bit vector, so one `pmaddwd` with the broadcast pair `(x_2k, x_2k+1)` adds two
/// products to four outputs' sums. Same arithmetic as `forward16` (sums fit `i32`, proven at
/// load; hidden activations saturate to `[0, 32767]`).
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_add_epi32, _mm_madd_epi16, _mm_set1_epi32, _mm_setzero_si128, _mm_srai_epi32,
        _mm_storeu_si128,
    };

    /// Widest layer the kernel takes (its stack buffers).
    pub const WIDTH_MAX: usize = 256;

    #[derive(Clone, Debug)]
    struct Layer {
        pairs: usize,
        blocks: usize,
        w: Vec<__m128i>,
        b: Vec<i32>,
    }

    #[derive(Clone, Debug)]
    pub struct Packed {
        layers: Vec<Layer>,
        two_outputs: bool,
    }

    fn vec4(v: [i32; 4]) -> __m128i {
        let lo = (v[0] as u32 as i64) | ((v[1] as u32 as i64) << 32);
        let hi = (v[2] as u32 as i64) | ((v[3] as u32 as i64) << 32);
        // SAFETY: SSE2 is part of the x86-64 baseline, so the intrinsic is always available.
        unsafe { std::arch::x86_64::_mm_set_epi64x(hi, lo) }
    }

    impl Packed {
        pub fn new(dims: &[usize], w16: &[Vec<i16>], biases: &[Vec<i64>]) -> Option<Self> {
            if dims.iter().any(|&d| d > WIDTH_MAX) {
                return None;
            }
            let mut layers = Vec::new();
            for (l, (w, b)) in w16.iter().zip(biases).enumerate() {
                let (n_i, n_o) = (dims[l], dims[l + 1]);
                let pairs = n_i.div_ceil(2);
                let blocks = n_o.div_ceil(4);
                let at = |o: usize, i: usize| -> i32 {
                    if o < n_o && i < n_i {
                        i32::from(w[o * n_i + i]) as u16 as i32
                    } else {
                        0
                    }
                };
                let mut packed = Vec::with_capacity(pairs * blocks);
                for k in 0..pairs {
                    for blk in 0..blocks {
                        let mut lanes = [0i32; 4];
                        for (j, lane) in lanes.iter_mut().enumerate() {
                            let o = blk * 4 + j;
                            *lane = at(o, 2 * k) | (at(o, 2 * k + 1) << 16);
                        }
                        packed.push(vec4(lanes));
                    }
                }
                let mut bias = vec![0i32; blocks * 4];
                for (o, &x) in b.iter().enumerate() {
                    bias[o] = i32::try_from(x).ok()?;
                }
                layers.push(Layer {
                    pairs,
                    blocks,
                    w: packed,
                    b: bias,
                });
            }
            Some(Self {
                layers,
                two_outputs: dims.last() == Some(&2),
            })
        }

        /// The logit at scale 1024 for inputs already scaled (`x`, zero-padded).
        pub fn forward(&self, x: &[i16; WIDTH_MAX]) -> i64 {
            // SAFETY: SSE2 is part of the x86-64 baseline (every intrinsic here is available);
            // the one memory access, the store, is bounds-reasoned at its site.
            unsafe { self.forward_sse2(x) }
        }

        #[target_feature(enable = "sse2")]
        unsafe fn forward_sse2(&self, x: &[i16; WIDTH_MAX]) -> i64 {
            // Activations between layers; every lane a layer reads (its padded input pairs) is
            // written by the layer before it (padded outputs have zero weights and bias).
            let mut hidden = [0i16; WIDTH_MAX];
            let mut acc32 = [0i32; WIDTH_MAX];
            let last = self.layers.len() - 1;
            let mut out = [0i64; 2];
            for (l, layer) in self.layers.iter().enumerate() {
                let cur: &[i16; WIDTH_MAX] = if l == 0 { x } else { &hidden };
                let mut acc = [_mm_setzero_si128(); WIDTH_MAX / 4];
                let acc = &mut acc[..layer.blocks];
                for k in 0..layer.pairs {
                    let pair = (cur[2 * k] as u16 as u32) | ((cur[2 * k + 1] as u16 as u32) << 16);
                    let vx = _mm_set1_epi32(pair as i32);
                    let row = &layer.w[k * layer.blocks..(k + 1) * layer.blocks];
                    for (a, &w) in acc.iter_mut().zip(row) {
                        *a = _mm_add_epi32(*a, _mm_madd_epi16(w, vx));
                    }
                }
                let n = layer.blocks * 4;
                for (blk, a) in acc.iter().enumerate() {
                    let shifted = _mm_srai_epi32::<10>(*a);
                    // SAFETY: `acc32` has WIDTH_MAX >= blocks × 4 lanes, so the 16 bytes at
                    // `blk × 4` are in bounds; storeu has no alignment requirement.
                    unsafe {
                        _mm_storeu_si128(acc32.as_mut_ptr().add(blk * 4).cast(), shifted);
                    }
                }
                for (v, &b) in acc32[..n].iter_mut().zip(&layer.b) {
                    *v += b;
                }
                if l == last {
                    out[0] = i64::from(acc32[0]);
                    out[1] = i64::from(acc32[1]);
                } else {
                    for (c, &v) in hidden[..n].iter_mut().zip(&acc32[..n]) {
                        *c = v.clamp(0, i32::from(i16::MAX)) as i16;
                    }
                }
            }
            if self.two_outputs {
                out[1] - out[0]
            } else {
                out[0]
            }
        }
    }
}

/// The fixed-shape AVX2 kernel for Heimdall's network (`n ≤ 20 → 128 → 16 → 1`), chosen at load
/// when the CPU has AVX2 (`is_x86_feature_detected!`) and the weights take the 16-bit path. No
/// heap, no zeroing of wide buffers: layer 1 is 16 × 256-bit accumulators fed by broadcast input
/// pairs (`vpmaddwd`), layer 2 reads the 128 hidden activations as 64 pairs into 2 accumulators,
/// the output is a 16-term scalar dot product. Same arithmetic as `forward16` (proven `i32` sums,
/// arithmetic shift by 10, bias, saturation to `[0, 32767]`), so the decisions are identical.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        _mm256_add_epi32, _mm256_loadu_si256, _mm256_madd_epi16, _mm256_max_epi16,
        _mm256_packs_epi32, _mm256_permute4x64_epi64, _mm256_set1_epi32, _mm256_setzero_si256,
        _mm256_srai_epi32, _mm256_storeu_si256,
    };

    /// Inputs the kernel takes (padded to 10 pairs): Heimdall's `10 + P` for every P ≤ 9.
    pub const INPUTS_MAX: usize = 20;
    const H1: usize = 128;
    const H2: usize = 16;

    /// Weights in the kernel's layout.
    #[derive(Clone, Debug)]
    pub struct Fixed {
        /// Input pairs used (`ceil(n / 2)`).
        pairs: usize,
        /// Layer 1: per input pair `k`, 16 blocks of 8 outputs, each lane `[w(o,2k), w(o,2k+1)]`.
        w1: Box<[[i32; H1]; INPUTS_MAX / 2]>,
        b1: [i32; H1],
        /// Layer 2: per hidden pair `k` (64), 16 outputs' lanes `[w(o,2k), w(o,2k+1)]`.
        w2: Box<[[i32; H2]; H1 / 2]>,
        b2: [i32; H2],
        w3: [i32; H2],
        b3: i32,
    }

    fn lane(w: &[i16], n_i: usize, o: usize, i: usize) -> i32 {
        let lo = if i < n_i { w[o * n_i + i] } else { 0 };
        let hi = if i + 1 < n_i { w[o * n_i + i + 1] } else { 0 };
        i32::from(lo as u16) | (i32::from(hi as u16) << 16)
    }

    impl Fixed {
        /// The kernel for `dims` = `[n, 128, 16, 1]` (`n ≤ 20`) on a CPU with AVX2, else `None`.
        pub fn new(dims: &[usize], w16: &[Vec<i16>], biases: &[Vec<i64>]) -> Option<Self> {
            if dims.len() != 4
                || dims[0] > INPUTS_MAX
                || dims[1] != H1
                || dims[2] != H2
                || dims[3] != 1
                || !std::arch::is_x86_feature_detected!("avx2")
            {
                return None;
            }
            let n = dims[0];
            let mut w1 = Box::new([[0i32; H1]; INPUTS_MAX / 2]);
            for (k, row) in w1.iter_mut().enumerate() {
                for (o, v) in row.iter_mut().enumerate() {
                    // Block order: the packs in layer 1 interleave 128-bit halves; the kernel
                    // undoes that with a permute, so outputs keep their natural order.
                    *v = lane(&w16[0], n, o, 2 * k);
                }
            }
            let mut w2 = Box::new([[0i32; H2]; H1 / 2]);
            for (k, row) in w2.iter_mut().enumerate() {
                for (o, v) in row.iter_mut().enumerate() {
                    *v = lane(&w16[1], H1, o, 2 * k);
                }
            }
            let mut w3 = [0i32; H2];
            for (o, v) in w3.iter_mut().enumerate() {
                *v = i32::from(w16[2][o]);
            }
            let narrow = |b: &[i64]| -> Option<Vec<i32>> {
                b.iter().map(|&x| i32::try_from(x).ok()).collect()
            };
            let mut b1 = [0i32; H1];
            b1.copy_from_slice(&narrow(&biases[0])?);
            let mut b2 = [0i32; H2];
            b2.copy_from_slice(&narrow(&biases[1])?);
            let b3 = i32::try_from(biases[2][0]).ok()?;
            Some(Self {
                pairs: n.div_ceil(2),
                w1,
                b1,
                w2,
                b2,
                w3,
                b3,
            })
        }

        /// The logit at scale 1024 for inputs already scaled (`x`, zero-padded to 20).
        pub fn forward(&self, x: &[i16; INPUTS_MAX]) -> i64 {
            // SAFETY: `new` returns a kernel only when the CPU reports AVX2.
            unsafe { self.forward_avx2(x) }
        }

        #[target_feature(enable = "avx2")]
        unsafe fn forward_avx2(&self, x: &[i16; INPUTS_MAX]) -> i64 {
            // Layer 1: 16 accumulators of 8 outputs.
            let mut acc = [_mm256_setzero_si256(); H1 / 8];
            for k in 0..self.pairs {
                let pair = (x[2 * k] as u16 as u32) | ((x[2 * k + 1] as u16 as u32) << 16);
                let vx = _mm256_set1_epi32(pair as i32);
                let row = &self.w1[k];
                for (blk, a) in acc.iter_mut().enumerate() {
                    // SAFETY: `row` has 128 i32 = 16 × 32 bytes; block `blk` < 16 is in bounds.
                    let w = unsafe { _mm256_loadu_si256(row.as_ptr().add(blk * 8).cast()) };
                    *a = _mm256_add_epi32(*a, _mm256_madd_epi16(w, vx));
                }
            }
            // Shift, bias, saturate to i16 and clamp at 0; pairs of blocks pack into 16 i16.
            let mut hidden = [0i32; H1 / 2];
            let zero = _mm256_setzero_si256();
            for j in 0..H1 / 16 {
                // SAFETY: b1 has 128 lanes; blocks 2j and 2j+1 (< 16) are in bounds.
                let (b_lo, b_hi) = unsafe {
                    (
                        _mm256_loadu_si256(self.b1.as_ptr().add(16 * j).cast()),
                        _mm256_loadu_si256(self.b1.as_ptr().add(16 * j + 8).cast()),
                    )
                };
                let lo = _mm256_add_epi32(_mm256_srai_epi32::<10>(acc[2 * j]), b_lo);
                let hi = _mm256_add_epi32(_mm256_srai_epi32::<10>(acc[2 * j + 1]), b_hi);
                // packs saturates to [-32768, 32767] per 128-bit half: [lo0-3 hi0-3 lo4-7 hi4-7];
                // the permute restores [lo0-7 hi0-7].
                let packed = _mm256_permute4x64_epi64::<0xD8>(_mm256_packs_epi32(lo, hi));
                let relu = _mm256_max_epi16(packed, zero);
                // SAFETY: `hidden` has 64 i32 = 8 × 32 bytes; j < 8.
                unsafe { _mm256_storeu_si256(hidden.as_mut_ptr().add(8 * j).cast(), relu) };
            }
            // Layer 2: 64 hidden pairs into 2 accumulators of 8 outputs.
            let mut a0 = _mm256_setzero_si256();
            let mut a1 = _mm256_setzero_si256();
            for (k, &pair) in hidden.iter().enumerate() {
                let vx = _mm256_set1_epi32(pair);
                let row = &self.w2[k];
                // SAFETY: `row` has 16 i32 = 2 × 32 bytes.
                let (w0, w1) = unsafe {
                    (
                        _mm256_loadu_si256(row.as_ptr().cast()),
                        _mm256_loadu_si256(row.as_ptr().add(8).cast()),
                    )
                };
                a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(w0, vx));
                a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(w1, vx));
            }
            let mut h2 = [0i32; H2];
            // SAFETY: `h2` has 16 i32 = 2 × 32 bytes.
            unsafe {
                _mm256_storeu_si256(h2.as_mut_ptr().cast(), _mm256_srai_epi32::<10>(a0));
                _mm256_storeu_si256(h2.as_mut_ptr().add(8).cast(), _mm256_srai_epi32::<10>(a1));
            }
            // Output: 16-term dot product (the same i32 sum as the scalar path).
            let mut sum = 0i32;
            for ((&a, &b), &w) in h2.iter().zip(&self.b2).zip(&self.w3) {
                let h = (a + b).clamp(0, i32::from(i16::MAX));
                sum = sum.wrapping_add(h * w);
            }
            i64::from(sum >> 10) + i64::from(self.b3)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    /// A deterministic small Heimdall-shaped model (11→8→4→1).
    pub(crate) fn tiny(joint: u16) -> MlpFile {
        let dims = vec![10 + u32::from(joint), 8, 4, 1];
        let mut layers = Vec::new();
        let mut k = 1u32;
        for w in dims.windows(2) {
            let weights = (0..w[0] * w[1])
                .map(|_| {
                    k = k.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    ((k >> 16) % 2000) as f32 / 1000.0 - 1.0
                })
                .collect();
            let bias = (0..w[1]).map(|i| i as f32 * 0.01).collect();
            layers.push((weights, bias));
        }
        let n = dims[0] as usize;
        MlpFile {
            kind: InputKind::Heimdall,
            joint,
            dims,
            scale_min: vec![0.0; n],
            scale_max: vec![100.0; n],
            layers,
            threshold: 0.5,
        }
    }

    fn float_logit(f: &MlpFile, raw: &[f32]) -> f32 {
        let mut x: Vec<f32> = raw
            .iter()
            .zip(f.scale_min.iter().zip(&f.scale_max))
            .map(|(v, (lo, hi))| ((v - lo) / (hi - lo)).clamp(0.0, 1.0))
            .collect();
        for (l, (w, b)) in f.layers.iter().enumerate() {
            let n_i = x.len();
            let mut y: Vec<f32> = (0..b.len())
                .map(|o| (0..n_i).map(|i| w[o * n_i + i] * x[i]).sum::<f32>() + b[o])
                .collect();
            if l + 1 < f.layers.len() {
                y.iter_mut().for_each(|v| *v = v.max(0.0));
            }
            x = y;
        }
        x[0]
    }

    #[test]
    fn encode_decode_round_trip() {
        let f = tiny(3);
        let b = f.encode();
        assert_eq!(MlpFile::decode(&b).unwrap(), f);
    }

    #[test]
    fn quantised_inference_tracks_the_float_model() {
        let f = tiny(1);
        let q = QuantizedMlp::new(&f).unwrap();
        for s in 0..50 {
            let raw: Vec<f32> = (0..11).map(|i| ((s * 7 + i * 13) % 100) as f32).collect();
            let zf = float_logit(&f, &raw);
            let zq = q.logit_q(&raw) as f32 / 1024.0;
            assert!((zf - zq).abs() < 0.05, "{zf} vs {zq}");
        }
    }

    #[test]
    fn the_16_bit_path_matches_the_64_bit_path() {
        let f = tiny(1);
        let q = QuantizedMlp::new(&f).unwrap();
        let w16 = q
            .narrow
            .clone()
            .expect("small weights take the 16-bit path");
        for s in 0..200 {
            let raw: Vec<f32> = (0..11).map(|i| ((s * 31 + i * 17) % 150) as f32).collect();
            let mut a = [0i32; 16];
            let mut b = [0i32; 16];
            let wide = q.forward(&raw, &mut a, &mut b);
            let mut c = [0i16; 16];
            let mut d = [0i16; 16];
            assert_eq!(q.forward16(&w16, &raw, &mut c, &mut d), wide);
        }
        // Weights too large for the i32 bound fall back to the wide path.
        let mut big = tiny(1);
        big.layers[0].0.iter_mut().for_each(|w| *w *= 1000.0);
        assert!(QuantizedMlp::new(&big).unwrap().narrow.is_none());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_sse2_kernel_matches_the_scalar_16_bit_path() {
        let mut linnos = tiny(1);
        linnos.kind = InputKind::LinnOs;
        linnos.dims = vec![31, 9, 2];
        linnos.scale_min = vec![0.0; 31];
        linnos.scale_max = vec![9.0; 31];
        linnos.layers = vec![
            (
                (0..31 * 9)
                    .map(|i| ((i * 7) % 13) as f32 / 10.0 - 0.6)
                    .collect(),
                vec![0.1; 9],
            ),
            (
                (0..18).map(|i| (i % 5) as f32 / 4.0 - 0.5).collect(),
                vec![0.0, 0.2],
            ),
        ];
        for f in [tiny(1), tiny(4), linnos] {
            let q = QuantizedMlp::new(&f).unwrap();
            let w16 = q.narrow.clone().unwrap();
            assert!(q.packed.is_some());
            for s in 0..300u32 {
                let raw: Vec<f32> = (0..f.dims[0])
                    .map(|i| ((s * 37 + i * 11) % 120) as f32 / 10.0)
                    .collect();
                let mut c = [0i16; 64];
                let mut d = [0i16; 64];
                let scalar = q.forward16(&w16, &raw, &mut c, &mut d);
                assert_eq!(q.logit_q(&raw), scalar, "model {:?} input {s}", f.dims);
            }
        }
    }

    /// A Heimdall-shaped `n → 128 → 16 → 1` model with deterministic weights; `hot` biases push
    /// some hidden activations past the 16-bit saturation point.
    fn heimdall_shaped(n: u32, hot: bool) -> MlpFile {
        let dims = vec![n, 128, 16, 1];
        let mut k = 7u32;
        let mut next = move || {
            k = k.wrapping_mul(1_103_515_245).wrapping_add(12345);
            ((k >> 16) % 2000) as f32 / 2500.0 - 0.4
        };
        let layers = dims
            .windows(2)
            .enumerate()
            .map(|(l, w)| {
                let weights = (0..w[0] * w[1]).map(|_| next()).collect();
                let bias = (0..w[1])
                    .map(|o| {
                        if hot && l == 0 && o % 5 == 0 {
                            40.0
                        } else {
                            next()
                        }
                    })
                    .collect();
                (weights, bias)
            })
            .collect();
        MlpFile {
            kind: InputKind::Heimdall,
            joint: (n - 10) as u16,
            dims,
            scale_min: vec![0.0; n as usize],
            scale_max: vec![100.0; n as usize],
            layers,
            threshold: 0.3,
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_kernel_matches_the_scalar_16_bit_path() {
        for (n, hot) in [(11, false), (11, true), (12, false), (16, true), (19, true)] {
            let f = heimdall_shaped(n, hot);
            let q = QuantizedMlp::new(&f).unwrap();
            let w16 = q.narrow.clone().expect("16-bit path");
            if std::arch::is_x86_feature_detected!("avx2") {
                assert_eq!(q.kernel(), "avx2-fixed");
            } else {
                assert_eq!(q.kernel(), "sse2");
            }
            let mut x = [0i16; sse2::WIDTH_MAX];
            for s in 0..500u32 {
                let raw: Vec<f32> = (0..n)
                    .map(|i| ((s * 37 + i * 11) % 130) as f32 - 10.0)
                    .collect();
                let mut c = [0i16; 128];
                let mut d = [0i16; 128];
                let scalar = q.forward16(&w16, &raw, &mut c, &mut d);
                assert_eq!(q.logit_q(&raw), scalar, "n {n} hot {hot} input {s}");
                q.scale_inputs16(&raw, &mut x);
                let sse = q.packed.as_ref().unwrap().forward(&x);
                assert_eq!(sse, scalar, "sse2, n {n} input {s}");
            }
        }
        // Other shapes never take the fixed kernel.
        assert_ne!(QuantizedMlp::new(&tiny(1)).unwrap().kernel(), "avx2-fixed");
    }

    #[test]
    fn every_damaged_byte_is_an_error() {
        let b = tiny(1).encode();
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x5a;
            assert!(
                QuantizedMlp::from_bytes(&d).is_err(),
                "flipping byte {i} went unnoticed"
            );
        }
        for n in 0..b.len() {
            assert!(
                MlpFile::decode(&b[..n]).is_err(),
                "truncation at {n} went unnoticed"
            );
        }
    }

    #[test]
    fn a_truncated_file_says_how_long_it_should_be() {
        let b = tiny(1).encode();
        for n in [32, 40, b.len() - 100, b.len() - 1] {
            let e = MlpFile::decode(&b[..n]).unwrap_err().to_string();
            assert!(
                e.contains(&format!("truncated ({n} of {} bytes)", b.len())),
                "cut at {n}: {e}"
            );
        }
        // A header that is cut short itself cannot declare a length.
        let e = MlpFile::decode(&b[..18]).unwrap_err().to_string();
        assert!(!e.contains("truncated ("), "{e}");
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let mut b = tiny(1).encode();
        let e = MlpFile::decode(b"PICKLE!!....").unwrap_err().to_string();
        assert!(e.contains("bad magic"), "{e}");
        b[8] = 9;
        let e = MlpFile::decode(&b).unwrap_err().to_string();
        assert!(
            e.contains("checksum"),
            "a changed byte is damage first: {e}"
        );
        reseal(&mut b);
        let e = MlpFile::decode(&b).unwrap_err().to_string();
        assert!(e.contains("unsupported model file version 9"), "{e}");
        let mut b = tiny(1).encode();
        let n = b.len();
        b[n - 10] ^= 1;
        let e = MlpFile::decode(&b).unwrap_err().to_string();
        assert!(e.contains("checksum"), "{e}");
        let mut b = tiny(1).encode();
        b.push(0);
        reseal(&mut b);
        let e = MlpFile::decode(&b).unwrap_err().to_string();
        assert!(e.contains("dimensions need"), "{e}");
    }

    #[test]
    fn a_bad_weight_or_scaling_names_its_byte_and_value() {
        let f = tiny(1);
        let inputs = f.dims[0] as usize;
        let first_weight = 16 + 4 * f.dims.len() + 8 * inputs;
        let put = |at: usize, x: f32| {
            let mut b = f.encode();
            b[at..at + 4].copy_from_slice(&x.to_le_bytes());
            reseal(&mut b);
            MlpFile::decode(&b).unwrap_err()
        };
        let e = put(first_weight + 4, 1e30);
        assert!(
            matches!(e, IoError::CorruptModel { offset, .. } if offset as usize == first_weight + 4)
        );
        let e = e.to_string();
        assert!(
            e.contains("layer 1: element 1 is ") && e.contains("too large to quantise"),
            "{e}"
        );
        let e = put(first_weight, f32::NAN).to_string();
        assert!(e.contains("element 0 is NaN, not a finite number"), "{e}");
        // Input 0's scaling: min 5 above max 1.
        let mut b = f.encode();
        let at = 16 + 4 * f.dims.len();
        b[at..at + 4].copy_from_slice(&5f32.to_le_bytes());
        b[at + 4..at + 8].copy_from_slice(&1f32.to_le_bytes());
        reseal(&mut b);
        let e = MlpFile::decode(&b).unwrap_err();
        assert!(matches!(e, IoError::CorruptModel { offset, .. } if offset as usize == at));
        assert!(e.to_string().contains("min 5 is above max 1"), "{e}");
    }

    /// Rewrites the trailing checksum over everything before it, so that a test's edit of a
    /// field reaches the field's own check.
    fn reseal(b: &mut [u8]) {
        let n = b.len() - 4;
        let crc = crc32c::crc32c(&b[..n]);
        b[n..].copy_from_slice(&crc.to_le_bytes());
    }

    /// [`tiny`] as a live model (Heimdall's features plus the 3 in-flight ones).
    pub(crate) fn tiny_live() -> MlpFile {
        let mut f = tiny(1 + crate::features::LIVE_FEATURES as u16);
        f.kind = InputKind::HeimdallLive;
        f.joint = 1;
        f
    }

    #[test]
    fn a_live_model_takes_fourteen_inputs() {
        let f = tiny_live();
        assert_eq!(f.inputs(), crate::features::HEIMDALL_LIVE_FEATURES);
        let b = f.encode();
        assert_eq!(MlpFile::decode(&b).unwrap(), f);
        let q = QuantizedMlp::from_bytes(&b).unwrap();
        assert_eq!(q.kind(), InputKind::HeimdallLive);
        let raw: Vec<f32> = (0..14).map(|i| i as f32 * 7.0).collect();
        let z = q.logit_q(&raw) as f32 / QUANT as f32;
        assert!((z - float_logit(&f, &raw)).abs() < 0.1, "{z}");
        // A Heimdall-shaped file labelled live has the wrong number of inputs.
        let mut wrong = tiny(1);
        wrong.kind = InputKind::HeimdallLive;
        let e = MlpFile::decode(&wrong.encode()).unwrap_err().to_string();
        assert!(
            e.contains("11 inputs, but this input kind and joint size need 14"),
            "{e}"
        );
        let mut b = f.encode();
        b[10] = 5;
        reseal(&mut b);
        let e = MlpFile::decode(&b).unwrap_err().to_string();
        assert!(e.contains("input kind 5"), "{e}");
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let base = tiny(2).encode();
        for round in 0..2000 {
            let mut d = base.clone();
            for _ in 0..(round % 7 + 1) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x % d.len() as u64) as usize;
                d[i] = (x >> 32) as u8;
            }
            let cut = (x >> 40) as usize % (d.len() + 1);
            let _ = QuantizedMlp::from_bytes(&d[..cut]);
            let _ = QuantizedMlp::from_bytes(&d);
        }
    }
}
