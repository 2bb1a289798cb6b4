//! What the storage crash writer writes, so the test can check it.

pub const RECORDS_PER_BATCH: usize = 5;

/// The value stored at `offset`: distinct per offset, so a batch that moved
/// or was half-written cannot pass for another.
pub fn expected_value(offset: i64) -> Vec<u8> {
    let mut v = format!("offset-{offset}-").into_bytes();
    v.resize(200 + (offset % 97) as usize, b'a' + (offset % 26) as u8);
    v
}
