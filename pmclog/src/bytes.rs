//! Little-endian field access inside a record whose length was already checked.
//!
//! The decoder checks a record's length against its type before it reads any field, so every
//! offset used here is in bounds; the checked accessors still return 0 rather than panic if that
//! reasoning were ever wrong (the fuzz target would then find a wrong value, not a crash).

#[inline]
pub(crate) fn read_u32(bytes: &[u8], offset: usize) -> u32 {
    match bytes.get(offset..offset + 4) {
        Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        None => 0,
    }
}

#[inline]
pub(crate) fn read_i32(bytes: &[u8], offset: usize) -> i32 {
    read_u32(bytes, offset) as i32
}

#[inline]
pub(crate) fn read_u64(bytes: &[u8], offset: usize) -> u64 {
    match bytes.get(offset..offset + 8) {
        Some(b) => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        None => 0,
    }
}

#[inline]
pub(crate) fn write_u32(buf: &mut [u8], offset: usize, value: u32) {
    buf[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

#[inline]
pub(crate) fn write_u64(buf: &mut [u8], offset: usize, value: u64) {
    buf[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

/// The bytes of a NUL-terminated string stored in `field`, without the NUL; `None` when the field
/// holds no NUL.
#[inline]
pub(crate) fn c_string(field: &[u8]) -> Option<&[u8]> {
    field.iter().position(|&b| b == 0).map(|nul| &field[..nul])
}

/// The bytes of a fixed-size name field: up to the first NUL, or the whole field if it is full.
#[inline]
pub(crate) fn fixed_string(field: &[u8]) -> &[u8] {
    c_string(field).unwrap_or(field)
}
