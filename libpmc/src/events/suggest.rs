//! Close matches for an unknown event name.

/// The most suggestions an error lists.
pub(super) const MAX_SUGGESTIONS: usize = 5;

/// `name` in upper case with FreeBSD's interchangeable separators (' ', '_', '-', '.') made one,
/// as `pmc_match_event_name` compares names.
pub(super) fn normalize(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ' ' | '_' | '-' | '.' => '_',
            c => c.to_ascii_uppercase(),
        })
        .collect()
}

/// Up to [`MAX_SUGGESTIONS`] candidates close to `query`: within a small edit distance
/// (insertions, deletions, substitutions and transpositions), or containing it, or contained in
/// it. Closer ones first; at the same distance, events the host offers (`offered`) first.
pub(super) fn suggestions<'a>(
    query: &str,
    candidates: impl IntoIterator<Item = (&'a str, bool)>,
) -> Vec<String> {
    let query = normalize(query.trim());
    if query.is_empty() {
        return Vec::new();
    }
    let query_chars: Vec<char> = query.chars().collect();
    let threshold = (query_chars.len() / 4).clamp(1, 3);
    let mut scored: Vec<(usize, bool, usize, &str)> = Vec::new();
    for (name, offered) in candidates {
        let candidate = normalize(name);
        let candidate_chars: Vec<char> = candidate.chars().collect();
        let distance = edit_distance(&query_chars, &candidate_chars);
        let score = if distance <= threshold {
            distance
        } else if query_chars.len() >= 3 && candidate.contains(&query) {
            threshold + 1
        } else if candidate_chars.len() >= 3 && query.contains(&candidate) {
            threshold + 2
        } else {
            continue;
        };
        scored.push((score, !offered, candidate_chars.len(), name));
    }
    scored.sort();
    let mut result: Vec<String> = Vec::new();
    for (_, _, _, name) in scored {
        if !result.iter().any(|seen| seen.eq_ignore_ascii_case(name)) {
            result.push(name.to_string());
        }
        if result.len() == MAX_SUGGESTIONS {
            break;
        }
    }
    result
}

/// The optimal-string-alignment distance between `a` and `b`: the fewest insertions, deletions,
/// substitutions and transpositions of adjacent characters that turn one into the other.
pub(super) fn edit_distance(a: &[char], b: &[char]) -> usize {
    let width = b.len() + 1;
    let mut rows = vec![0usize; (a.len() + 1) * width];
    for (j, cell) in rows.iter_mut().take(width).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        rows[i * width] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[(i - 1) * width + j] + 1)
                .min(rows[i * width + j - 1] + 1)
                .min(rows[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[(i - 2) * width + j - 2] + 1);
            }
            rows[i * width + j] = best;
        }
    }
    rows[a.len() * width + b.len()]
}
