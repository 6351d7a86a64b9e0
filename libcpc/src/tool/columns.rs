//! The output columns of cpustat and cputrack (reference §7.3).

use std::fmt::Write;

/// The header of a request on counter `pic`: `"%8s%-2d "` of `pic` and the number, cut to 10
/// characters (`"     pic0 "`).
pub fn pic_header(pic: usize) -> String {
    let mut h = format!("{:>8}{:<2} ", "pic", pic);
    h.truncate(10);
    h
}

/// The headers of `pics`, concatenated.
pub fn pic_headers(pics: &[usize]) -> String {
    pics.iter().map(|&p| pic_header(p)).collect()
}

/// Values as `"%9" PRId64 " "` each (a signed print of the 64-bit value).
pub fn values(values: &[u64]) -> String {
    let mut s = String::new();
    for &v in values {
        let _ = write!(s, "{:>9} ", v as i64);
    }
    s
}

/// The `-t` column of a tick: `"%9" PRId64 " "`.
pub fn tick(tick: u64) -> String {
    format!("{:>9} ", tick as i64)
}

/// The end of a line: `" # <spec>\n"` when several specs cycle, else `"\n"`.
pub fn line_end(spec: &str, several: bool) -> String {
    if several { format!(" # {spec}\n") } else { "\n".into() }
}

#[cfg(test)]
mod tests {
    use super::{pic_header, values};

    #[test]
    fn headers_are_ten_characters() {
        assert_eq!(pic_header(0), "     pic0 ");
        assert_eq!(pic_header(12), "     pic12");
    }

    #[test]
    fn values_are_signed_and_nine_wide() {
        assert_eq!(values(&[765308, u64::MAX]), "   765308        -1 ");
    }
}
