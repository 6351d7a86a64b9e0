//! Counter assignment at bind: illumos' greedy algorithm (reference §4.1), so requests land on
//! the same PICs as there.

/// What the assignment needs to know of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The PIC it names with `picnum`, if any.
    pub picnum: Option<usize>,
    /// The PICs that can count its event when it names none, in any order.
    pub coverage: Vec<usize>,
}

/// Assigns a PIC to every request (indexed as `needs`), or `None` when the greedy search finds
/// no assignment. Requests with `picnum` own their PIC; for each start s over the requests in
/// the kernel's order (last added first), the others, taken cyclically from s, each take the
/// lowest free PIC of their coverage.
pub fn assign(needs: &[Need], npic: usize) -> Option<Vec<usize>> {
    let n = needs.len();
    let mut reserved = vec![false; npic];
    for need in needs {
        if let Some(p) = need.picnum {
            *reserved.get_mut(p)? = true;
        }
    }
    // The kernel's array is the request list, which is last-added first.
    let order: Vec<usize> = (0..n).rev().collect();
    'start: for s in 0..n.max(1) {
        let mut taken = reserved.clone();
        let mut pics: Vec<usize> = needs.iter().map(|need| need.picnum.unwrap_or(0)).collect();
        for k in 0..n {
            let r = order[(s + k) % n];
            if needs[r].picnum.is_some() {
                continue;
            }
            let mut coverage = needs[r].coverage.clone();
            coverage.sort_unstable();
            let Some(&pic) = coverage.iter().find(|&&p| p < npic && !taken[p]) else {
                continue 'start;
            };
            taken[pic] = true;
            pics[r] = pic;
        }
        return Some(pics);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{Need, assign};

    fn free(coverage: &[usize]) -> Need {
        Need { picnum: None, coverage: coverage.to_vec() }
    }

    #[test]
    fn the_last_added_request_takes_the_lowest_counter_first() {
        let needs = [free(&[0, 1, 2, 3]), free(&[0, 1, 2, 3])];
        assert_eq!(assign(&needs, 4), Some(vec![1, 0]));
    }

    #[test]
    fn explicit_picnums_are_reserved_for_their_requests() {
        let needs = [Need { picnum: Some(0), coverage: vec![] }, free(&[0, 1])];
        assert_eq!(assign(&needs, 2), Some(vec![0, 1]));
    }

    #[test]
    fn another_start_is_tried_when_the_first_fails() {
        // Request 1 (first in kernel order) grabs 0, leaving request 0 (only 0) nothing; the
        // start at request 0 succeeds.
        let needs = [free(&[0]), free(&[0, 1])];
        assert_eq!(assign(&needs, 2), Some(vec![0, 1]));
    }

    #[test]
    fn no_assignment_when_counters_run_out_or_coverage_is_empty() {
        assert_eq!(assign(&[free(&[0]), free(&[0])], 2), None);
        assert_eq!(assign(&[free(&[])], 2), None, "a raw code without picnum");
    }
}
