//! Buffers (`cpc_buf_t`): one sample of a set — its 64-bit counter values by request index, the
//! time of the sample and the virtualized tick — and their arithmetic, all in user space.

/// A sample of a set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Buf {
    pub(crate) data: Vec<u64>,
    pub(crate) hrtime: i64,
    pub(crate) tick: u64,
    /// The records of each SMPL request (`None` for a counter request): one instruction pointer
    /// each (see [`crate::smpl`]).
    pub(crate) smpl: Vec<Option<Vec<u64>>>,
}

impl Buf {
    /// A zeroed buffer for a set of `nreqs` requests.
    pub fn new(nreqs: usize) -> Buf {
        Buf { data: vec![0; nreqs], hrtime: 0, tick: 0, smpl: vec![None; nreqs] }
    }

    /// A zeroed buffer for `set`, with room for the records of its SMPL requests.
    pub fn for_set(set: &crate::Set) -> Buf {
        let mut buf = Buf::new(set.requests().len());
        for (slot, request) in buf.smpl.iter_mut().zip(set.requests()) {
            if request.is_smpl() {
                *slot = Some(Vec::new());
            }
        }
        buf
    }

    /// The records of SMPL request `index` (each one item: the instruction pointer), or `None`
    /// if it is no SMPL request.
    pub fn smpl_records(&self, index: usize) -> Option<&[u64]> {
        self.smpl.get(index)?.as_deref()
    }

    /// The number of values (the set's request count when the buffer was made).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the buffer holds no values.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The value of request `index`, if the buffer has one.
    pub fn get(&self, index: usize) -> Option<u64> {
        self.data.get(index).copied()
    }

    /// Sets the value of request `index`; `false` if the buffer has no such index.
    pub fn set(&mut self, index: usize, value: u64) -> bool {
        self.data.get_mut(index).map(|v| *v = value).is_some()
    }

    /// The values, by request index.
    pub fn values(&self) -> &[u64] {
        &self.data
    }

    /// When the sample was taken, in nanoseconds of [`gethrtime`].
    pub fn hrtime(&self) -> i64 {
        self.hrtime
    }

    /// The virtualized TSC cycles since bind at the sample.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// `a − b` into a new buffer (wrapping values, tick difference, the later hrtime), or `None`
    /// if the sizes differ (`cpc_buf_sub` then does nothing).
    pub fn sub(a: &Buf, b: &Buf) -> Option<Buf> {
        Buf::combine(a, b, u64::wrapping_sub)
    }

    /// `a + b`, as [`Buf::sub`].
    pub fn add(a: &Buf, b: &Buf) -> Option<Buf> {
        Buf::combine(a, b, u64::wrapping_add)
    }

    fn combine(a: &Buf, b: &Buf, op: fn(u64, u64) -> u64) -> Option<Buf> {
        // SMPL records are not numbers: the result keeps `a`'s.
        (a.data.len() == b.data.len()).then(|| Buf {
            data: a.data.iter().zip(&b.data).map(|(&x, &y)| op(x, y)).collect(),
            hrtime: a.hrtime.max(b.hrtime),
            tick: op(a.tick, b.tick),
            smpl: a.smpl.clone(),
        })
    }

    /// Copies `src` into this buffer; `false` (nothing copied) if the sizes differ.
    pub fn copy_from(&mut self, src: &Buf) -> bool {
        if self.data.len() != src.data.len() {
            return false;
        }
        self.data.copy_from_slice(&src.data);
        self.hrtime = src.hrtime;
        self.tick = src.tick;
        self.smpl.clone_from(&src.smpl);
        true
    }

    /// Zeroes the values, hrtime and tick.
    pub fn zero(&mut self) {
        self.data.fill(0);
        self.hrtime = 0;
        self.tick = 0;
        self.smpl.iter_mut().flatten().for_each(Vec::clear);
    }
}

/// Nanoseconds of `CLOCK_MONOTONIC` (Solaris' `gethrtime(3C)`), the clock of
/// [`Buf::hrtime`].
pub fn gethrtime() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

#[cfg(test)]
mod tests {
    use super::Buf;

    fn buf(data: &[u64], hrtime: i64, tick: u64) -> Buf {
        Buf { data: data.to_vec(), hrtime, tick, smpl: vec![None; data.len()] }
    }

    #[test]
    fn sub_wraps_values_subtracts_ticks_and_keeps_the_later_hrtime() {
        let d = Buf::sub(&buf(&[5, 1], 10, 100), &buf(&[3, 2], 20, 40)).unwrap();
        assert_eq!(d, buf(&[2, u64::MAX], 20, 60));
    }

    #[test]
    fn add_wraps_and_keeps_the_later_hrtime() {
        let s = Buf::add(&buf(&[u64::MAX, 1], 30, 1), &buf(&[2, 2], 20, 2)).unwrap();
        assert_eq!(s, buf(&[1, 3], 30, 3));
    }

    #[test]
    fn buffers_of_different_sizes_do_not_combine_or_copy() {
        assert!(Buf::sub(&buf(&[1], 0, 0), &buf(&[1, 2], 0, 0)).is_none());
        let mut dst = buf(&[7], 1, 1);
        assert!(!dst.copy_from(&buf(&[1, 2], 5, 5)));
        assert_eq!(dst, buf(&[7], 1, 1));
    }

    #[test]
    fn get_and_set_refuse_an_index_past_the_end() {
        let mut b = Buf::new(2);
        assert!(b.set(1, 9));
        assert_eq!(b.get(1), Some(9));
        assert!(!b.set(2, 1));
        assert_eq!(b.get(2), None);
        b.zero();
        assert_eq!(b, Buf::new(2));
    }
}
