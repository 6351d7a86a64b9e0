//! Short strings built without allocation, for fixed-size name fields.

use core::fmt;

/// Up to `N − 1` bytes of text in a NUL-padded `[u8; N]`; writing more truncates.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FixedText<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> FixedText<N> {
    /// Empty text.
    pub const fn new() -> Self {
        FixedText { bytes: [0; N], len: 0 }
    }

    /// The text's bytes (without the padding).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// The whole NUL-padded field.
    pub fn field(&self) -> [u8; N] {
        self.bytes
    }
}

impl<const N: usize> Default for FixedText<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Write for FixedText<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = N.saturating_sub(1) - self.len;
        let take = s.len().min(room);
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

impl<const N: usize> fmt::Debug for FixedText<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(core::str::from_utf8(self.as_bytes()).unwrap_or("?"), f)
    }
}

/// The `kern.hwpmc.cpuid` string (at most 63 bytes), held without allocation.
pub type CpuIdString = FixedText<64>;

#[cfg(test)]
mod tests {
    use super::FixedText;
    use core::fmt::Write;

    #[test]
    fn writes_truncate_and_keep_room_for_the_nul() {
        let mut text = FixedText::<8>::new();
        write!(text, "IAP-{}", 12345).unwrap();
        assert_eq!(text.as_bytes(), b"IAP-123");
        assert_eq!(text.field(), *b"IAP-123\0");
    }
}
