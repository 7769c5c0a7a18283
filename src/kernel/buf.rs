//! A growable f32 buffer aligned to 64 bytes (one cache line, one AVX-512 register), so
//! that vector loads from scratch never straddle two cache lines.

/// One cache line of f32s; the unit of allocation of [`AlignedBuf`].
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

const LINE: usize = 16;

/// f32 storage whose first element is 64-byte aligned.
#[derive(Clone, Default)]
pub struct AlignedBuf {
    lines: Vec<Line>,
    len: usize,
}

impl AlignedBuf {
    pub fn new() -> Self {
        Self::default()
    }

    /// A buffer of `len` zeros.
    pub fn zeros(len: usize) -> Self {
        let mut b = Self::new();
        b.resize_zeroed(len);
        b
    }

    /// Make the buffer `len` long, all zeros (reuses the allocation when it is big enough).
    pub fn resize_zeroed(&mut self, len: usize) {
        self.lines.clear();
        self.lines.resize(len.div_ceil(LINE), Line([0.0; LINE]));
        self.len = len;
    }

    /// Make the buffer at least `len` long without clearing what it holds.
    pub fn ensure(&mut self, len: usize) {
        if len > self.len {
            self.lines.resize(len.div_ceil(LINE), Line([0.0; LINE]));
            self.len = len;
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[f32] {
        // SAFETY: `Line` is repr(C) over [f32; 16] with no padding (64 bytes, align 64),
        // so `lines` is `16 * lines.len()` initialised, contiguous f32s and len fits.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<f32>(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<f32>(), self.len) }
    }
}

impl From<&[f32]> for AlignedBuf {
    fn from(src: &[f32]) -> Self {
        let mut b = Self::zeros(src.len());
        b.as_mut_slice().copy_from_slice(src);
        b
    }
}

/// glibc returns a freed block of more than 128 KB (raised adaptively up to 32 MB) to the
/// system, and worker threads' arenas shrink whenever their free top passes a threshold,
/// so every kernel call's packed tiles and gradient buffers came back as fresh pages: in
/// the backward at N = 1024 one call took about 4,800 page faults. Fixed thresholds keep
/// blocks of up to 32 MB in the heap for the next call (PyTorch keeps a caching allocator
/// for the same reason). Peak memory is unchanged; what is freed stays mapped.
/// The binary calls this first thing; so do the benchmark programs that stand for it.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; it is called before other threads.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        let mut b = AlignedBuf::zeros(37);
        assert_eq!(b.len(), 37);
        assert_eq!(b.as_slice().as_ptr() as usize % 64, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0.0));
        b.as_mut_slice()[36] = 2.0;
        b.ensure(100);
        assert_eq!(b.as_slice()[36], 2.0);
        assert_eq!(b.len(), 100);
        b.resize_zeroed(10);
        assert!(b.as_slice().iter().all(|&x| x == 0.0));
    }
}
